"""Renderers: terminal tables, JSON and CSV of analyses, measurements, validations and calibrations."""
