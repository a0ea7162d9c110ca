/* Reads the parts of a serialized onnx GraphProto that analysis needs (nodes, initializer headers, value
 * types) straight from the protobuf wire format into Python values, and encodes the typed graph inputs that
 * shape inference gets for large weights.
 *
 * Reading a large graph field by field through the protobuf Python API costs about as much as onnx's C++
 * shape inference of it; decoding the bytes here costs a small fraction of that.
 * The Python reader it stands in for (read.read_graph_python, read.value_types, lean.typed_inputs_python) is
 * used where this module was not built and defines the values returned: tests/load/test_native_reader.py checks
 * that the two agree on the same graphs.
 *
 * Field numbers are onnx.proto's. The input is a serialization protobuf wrote, so every field is well formed;
 * anything else (a truncated field, a group, an unknown wire type) raises ValueError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} Span;

typedef struct {
    uint32_t field;
    uint32_t wire;
    uint64_t value; /* a varint or fixed value */
    Span bytes;     /* a length-delimited payload */
} Field;

/* A little-endian unsigned integer of `size` bytes: protobuf's fixed32 and fixed64, on any host. */
static uint64_t little_endian(const uint8_t *p, int size) {
    uint64_t value = 0;
    for (int k = size - 1; k >= 0; k--) value = value << 8 | p[k];
    return value;
}

static int bad_wire(void) {
    PyErr_SetString(PyExc_ValueError, "malformed protobuf wire data");
    return -1;
}

static int read_varint(Span *s, uint64_t *out) {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (s->p >= s->end) return bad_wire();
        uint8_t byte = *s->p++;
        value |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80)) {
            *out = value;
            return 0;
        }
    }
    return bad_wire();
}

/* The next field of a message: 1 when one was read, 0 at the end, -1 on an error. */
static int next_field(Span *s, Field *f) {
    if (s->p >= s->end) return 0;
    uint64_t key;
    if (read_varint(s, &key) < 0) return -1;
    f->field = (uint32_t)(key >> 3);
    f->wire = (uint32_t)(key & 7);
    switch (f->wire) {
    case 0:
        return read_varint(s, &f->value) < 0 ? -1 : 1;
    case 1:
        if (s->end - s->p < 8) return bad_wire();
        f->value = little_endian(s->p, 8);
        s->p += 8;
        return 1;
    case 5:
        if (s->end - s->p < 4) return bad_wire();
        f->value = little_endian(s->p, 4);
        s->p += 4;
        return 1;
    case 2: {
        uint64_t length;
        if (read_varint(s, &length) < 0) return -1;
        if ((uint64_t)(s->end - s->p) < length) return bad_wire();
        f->bytes.p = s->p;
        f->bytes.end = s->p + length;
        s->p += length;
        return 1;
    }
    default:
        return bad_wire();
    }
}

static PyObject *text(Span b) {
    return PyUnicode_DecodeUTF8((const char *)b.p, b.end - b.p, "replace");
}

/* Appends the values of a repeated integer field, packed (wire type 2) or not, to a list; 0 on success. */
static int append_ints(PyObject *list, const Field *f) {
    if (f->wire == 0) {
        PyObject *v = PyLong_FromLongLong((long long)f->value);
        if (v == NULL || PyList_Append(list, v) < 0) {
            Py_XDECREF(v);
            return -1;
        }
        Py_DECREF(v);
        return 0;
    }
    if (f->wire != 2) return bad_wire();
    Span packed = f->bytes;
    while (packed.p < packed.end) {
        uint64_t raw;
        if (read_varint(&packed, &raw) < 0) return -1;
        PyObject *v = PyLong_FromLongLong((long long)raw);
        if (v == NULL || PyList_Append(list, v) < 0) {
            Py_XDECREF(v);
            return -1;
        }
        Py_DECREF(v);
    }
    return 0;
}

static int append_float(PyObject *list, uint32_t bits) {
    float value;
    memcpy(&value, &bits, 4);
    PyObject *v = PyFloat_FromDouble((double)value);
    if (v == NULL || PyList_Append(list, v) < 0) {
        Py_XDECREF(v);
        return -1;
    }
    Py_DECREF(v);
    return 0;
}

/* Appends the values of a repeated float field, packed or not, to a list; 0 on success. */
static int append_floats(PyObject *list, const Field *f) {
    if (f->wire == 5) return append_float(list, (uint32_t)f->value);
    if (f->wire != 2 || (f->bytes.end - f->bytes.p) % 4) return bad_wire();
    for (const uint8_t *q = f->bytes.p; q < f->bytes.end; q += 4)
        if (append_float(list, (uint32_t)little_endian(q, 4)) < 0) return -1;
    return 0;
}

/* onnx AttributeProto.AttributeType values read here; the others are handed back as bytes. */
enum { ATTR_FLOAT = 1, ATTR_INT = 2, ATTR_STRING = 3, ATTR_FLOATS = 6, ATTR_INTS = 7, ATTR_STRINGS = 8 };

/* An attribute's value for the types read here, or NULL with no error set for the others. */
static PyObject *attribute_value(Span a, uint64_t type) {
    Span s = a;
    Field f;
    int r;
    PyObject *list = NULL;
    if (type == ATTR_INTS || type == ATTR_FLOATS || type == ATTR_STRINGS) {
        list = PyList_New(0);
        if (list == NULL) return NULL;
    } else if (type != ATTR_FLOAT && type != ATTR_INT && type != ATTR_STRING) {
        return NULL;
    }
    /* Proto2 defaults: an unset scalar reads 0 or "" as the protobuf API gives it. */
    uint64_t i = 0, fbits = 0;
    Span str = {a.p, a.p};
    while ((r = next_field(&s, &f)) == 1) {
        if (f.field == 3 && f.wire == 0) i = f.value;                           /* i */
        else if (f.field == 2 && f.wire == 5) fbits = f.value;                  /* f */
        else if (f.field == 4 && f.wire == 2) str = f.bytes;                    /* s */
        else if (f.field == 8 && type == ATTR_INTS) r = append_ints(list, &f);  /* ints */
        else if (f.field == 7 && type == ATTR_FLOATS) r = append_floats(list, &f); /* floats */
        else if (f.field == 9 && type == ATTR_STRINGS && f.wire == 2) {         /* strings */
            PyObject *v = text(f.bytes);
            r = (v == NULL || PyList_Append(list, v) < 0) ? -1 : 1;
            Py_XDECREF(v);
        }
        if (r < 0) break;
    }
    if (r < 0) {
        Py_XDECREF(list);
        return NULL;
    }
    if (list != NULL) return list;
    if (type == ATTR_INT) return PyLong_FromLongLong((long long)i);
    if (type == ATTR_STRING) return text(str);
    float value;
    uint32_t bits = (uint32_t)fbits;
    memcpy(&value, &bits, 4);
    return PyFloat_FromDouble((double)value);
}

/* What read_attribute tells its node about one attribute. */
typedef struct {
    Span name;
    uint64_t type;
    int has_tensor;
    Span tensor; /* its `t` field */
} AttributeHead;

/* Reads one AttributeProto into attrs[name] (in order, a later one of the same name replacing an earlier).
 * The types not read here are appended to `raw` as (node index, name, bytes) and set to None in attrs; the
 * caller decodes them with the protobuf API. */
static int read_attribute(Span a, Py_ssize_t node, PyObject *attrs, PyObject *raw, AttributeHead *head) {
    Span s = a;
    Field f;
    int r;
    head->name.p = head->name.end = a.p;
    head->type = 0;
    head->has_tensor = 0;
    while ((r = next_field(&s, &f)) == 1) {
        if (f.field == 1 && f.wire == 2) head->name = f.bytes;
        else if (f.field == 20 && f.wire == 0) head->type = f.value;
        else if (f.field == 5 && f.wire == 2) {
            head->has_tensor = 1;
            head->tensor = f.bytes;
        }
    }
    if (r < 0) return -1;
    PyObject *key = text(head->name);
    if (key == NULL) return -1;
    PyObject *value = attribute_value(a, head->type);
    if (value == NULL && !PyErr_Occurred()) {
        PyObject *entry = Py_BuildValue("(nOy#)", node, key, (const char *)a.p, (Py_ssize_t)(a.end - a.p));
        if (entry != NULL && PyList_Append(raw, entry) == 0) value = Py_NewRef(Py_None);
        Py_XDECREF(entry);
    }
    int failed = value == NULL || PyDict_SetItem(attrs, key, value) < 0;
    Py_DECREF(key);
    Py_XDECREF(value);
    return failed ? -1 : 0;
}

/* Strings that repeat across a graph (op types, domains), each built once and shared by the nodes. */
#define SHARED_TEXTS 64
typedef struct {
    Py_ssize_t count;
    Span spans[SHARED_TEXTS];
    PyObject *values[SHARED_TEXTS];
} SharedTexts;

static PyObject *shared_text(SharedTexts *cache, Span b) {
    Py_ssize_t length = b.end - b.p;
    for (Py_ssize_t k = 0; k < cache->count; k++) {
        Span c = cache->spans[k];
        if (c.end - c.p == length && memcmp(c.p, b.p, length) == 0) return Py_NewRef(cache->values[k]);
    }
    PyObject *value = text(b);
    if (value != NULL && cache->count < SHARED_TEXTS) {
        cache->spans[cache->count] = b;
        cache->values[cache->count++] = Py_NewRef(value);
    }
    return value;
}

static void release_shared_texts(SharedTexts *cache) {
    for (Py_ssize_t k = 0; k < cache->count; k++) Py_DECREF(cache->values[k]);
    cache->count = 0;
}

/* The `count` strings of a message's repeated string field `number`, as a tuple. */
static PyObject *strings(Span message, uint32_t number, Py_ssize_t count) {
    PyObject *result = PyTuple_New(count);
    if (result == NULL) return NULL;
    Span s = message;
    Field f;
    Py_ssize_t k = 0;
    while (k < count && next_field(&s, &f) == 1) {
        if (f.field != number || f.wire != 2) continue;
        PyObject *v = text(f.bytes);
        if (v == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        PyTuple_SET_ITEM(result, k++, v);
    }
    return result; /* the first pass read the same fields, so all `count` are there */
}

/* The name analysis gives a node that has none: "<op_type>_<index in the graph>". */
static PyObject *default_name(PyObject *op_type, Py_ssize_t index) {
    char digits[24];
    int n = 0;
    do {
        digits[n++] = (char)('0' + index % 10);
        index /= 10;
    } while (index > 0);
    char number[25];
    number[0] = '_';
    for (int k = 0; k < n; k++) number[k + 1] = digits[n - 1 - k];
    PyObject *suffix = PyUnicode_FromStringAndSize(number, n + 1);
    if (suffix == NULL) return NULL;
    PyObject *name = PyUnicode_Concat(op_type, suffix);
    Py_DECREF(suffix);
    return name;
}

/* A TensorProto's name, data type, dims (a new tuple), data location and element count (capped just above
 * `cap`: an unknown or negative dim counts as more). */
typedef struct {
    Span name;
    uint64_t data_type, location;
    PyObject *dims;
    long long elements;
} TensorHead;

static int read_tensor_head(Span t, long long cap, TensorHead *head) {
    Span s = t;
    Field f;
    int r;
    head->name.p = head->name.end = t.p;
    head->data_type = head->location = 0;
    head->elements = 1;
    PyObject *dims = PyList_New(0);
    if (dims == NULL) return -1;
    while ((r = next_field(&s, &f)) == 1) {
        if (f.field == 1) r = append_ints(dims, &f) < 0 ? -1 : 1;
        else if (f.field == 2 && f.wire == 0) head->data_type = f.value;
        else if (f.field == 8 && f.wire == 2) head->name = f.bytes;
        else if (f.field == 14 && f.wire == 0) head->location = f.value;
        if (r < 0) break;
    }
    for (Py_ssize_t k = 0; r >= 0 && k < PyList_GET_SIZE(dims) && head->elements <= cap; k++) {
        long long d = PyLong_AsLongLong(PyList_GET_ITEM(dims, k));
        head->elements = d < 0 ? cap + 1 : head->elements * d;
    }
    head->dims = r < 0 ? NULL : PyList_AsTuple(dims);
    Py_DECREF(dims);
    return head->dims == NULL ? -1 : 0;
}

/* A new instance of `type`, a tuple subclass (a NamedTuple), with `size` items to set, allocated as
 * tuple.__new__ allocates one, without a Python call. */
static PyObject *new_record(PyTypeObject *type, Py_ssize_t size) { return type->tp_alloc(type, size); }

/* Whether `type` can be given to new_record; a TypeError where not. */
static int is_record_type(PyTypeObject *type, const char *function) {
    if (PyType_IsSubtype(type, &PyTuple_Type)) return 1;
    PyErr_Format(PyExc_TypeError, "%s: record types must be tuple subclasses", function);
    return 0;
}

/* One NodeProto as a `node_type` (onnxroof.load.read.RawNode) of (name, op_type, domain, inputs, outputs,
 * attrs, (dtype, dims) of a Constant's value tensor or None, whether an attribute is a graph). */
static PyObject *read_node(Span n, Py_ssize_t index, SharedTexts *cache, PyObject *raw, PyTypeObject *node_type) {
    Span s = n, name = {n.p, n.p}, op_type = {n.p, n.p}, domain = {n.p, n.p}, value_tensor = {n.p, n.p};
    Field f;
    int r, has_value = 0, has_subgraph = 0;
    Py_ssize_t input_count = 0, output_count = 0;
    AttributeHead head;
    PyObject *attrs = PyDict_New();
    if (attrs == NULL) return NULL;
    while ((r = next_field(&s, &f)) == 1) {
        if (f.wire != 2) continue;
        if (f.field == 1) input_count++;
        else if (f.field == 2) output_count++;
        else if (f.field == 3) name = f.bytes;
        else if (f.field == 4) op_type = f.bytes;
        else if (f.field == 7) domain = f.bytes;
        else if (f.field == 5) {
            if (read_attribute(f.bytes, index, attrs, raw, &head) < 0) break;
            has_subgraph = has_subgraph || head.type == 5; /* AttributeProto.GRAPH */
            if (head.name.end - head.name.p == 5 && memcmp(head.name.p, "value", 5) == 0) {
                has_value = 1;
                value_tensor = head.has_tensor ? head.tensor : (Span){n.p, n.p};
            }
        }
    }
    PyObject *result = r < 0 || PyErr_Occurred() ? NULL : new_record(node_type, 8);
    if (result == NULL) {
        Py_DECREF(attrs);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 5, attrs);
    PyTuple_SET_ITEM(result, 7, PyBool_FromLong(has_subgraph));
    PyObject *constant_type = Py_NewRef(Py_None);
    if (has_value && op_type.end - op_type.p == 8 && memcmp(op_type.p, "Constant", 8) == 0) {
        TensorHead tensor;
        Py_DECREF(constant_type);
        constant_type = read_tensor_head(value_tensor, 0, &tensor) < 0
            ? NULL : Py_BuildValue("(KN)", (unsigned long long)tensor.data_type, tensor.dims);
    }
    PyTuple_SET_ITEM(result, 6, constant_type);
    PyObject *op = constant_type ? shared_text(cache, op_type) : NULL;
    PyTuple_SET_ITEM(result, 1, op);
    PyObject *node_name = op == NULL ? NULL : name.p < name.end ? text(name) : default_name(op, index);
    PyTuple_SET_ITEM(result, 0, node_name);
    PyObject *dom = node_name ? shared_text(cache, domain) : NULL;
    PyTuple_SET_ITEM(result, 2, dom);
    PyObject *inputs = dom ? strings(n, 1, input_count) : NULL;
    PyTuple_SET_ITEM(result, 3, inputs);
    PyObject *outputs = inputs ? strings(n, 2, output_count) : NULL;
    PyTuple_SET_ITEM(result, 4, outputs);
    if (outputs != NULL) return result;
    Py_DECREF(result); /* releases the items set so far; the unset ones are NULL */
    return NULL;
}

/* One TensorProto's header as an `initializer_type` (onnxroof.load.read.RawInitializer) of (name, data_type,
 * dims, the whole tensor's bytes when it has at most `small` elements and is not external, else None). */
static PyObject *read_initializer(Span t, long long small, PyTypeObject *initializer_type) {
    TensorHead head;
    if (read_tensor_head(t, small, &head) < 0) return NULL;
    PyObject *value = head.elements <= small && head.location != 1 /* TensorProto.EXTERNAL */
        ? PyBytes_FromStringAndSize((const char *)t.p, t.end - t.p) : Py_NewRef(Py_None);
    PyObject *name = value ? text(head.name) : NULL;
    PyObject *data_type = name ? PyLong_FromUnsignedLongLong((unsigned long long)head.data_type) : NULL;
    PyObject *result = data_type ? new_record(initializer_type, 4) : NULL;
    if (result == NULL) {
        Py_DECREF(head.dims);
        Py_XDECREF(value);
        Py_XDECREF(name);
        Py_XDECREF(data_type);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 0, name);
    PyTuple_SET_ITEM(result, 1, data_type);
    PyTuple_SET_ITEM(result, 2, head.dims);
    PyTuple_SET_ITEM(result, 3, value);
    return result;
}

/* The element type and static shape of a TypeProto, as onnxroof.load.read.shape_of reads them: the shape is
 * None when the type has no tensor shape or any dim has no value or a negative one. */
static PyObject *read_type(Span type) {
    Span s = type;
    Field f;
    int r;
    uint64_t elem_type = 0;
    int has_shape = 0, known = 1;
    PyObject *dims = PyList_New(0);
    if (dims == NULL) return NULL;
    while ((r = next_field(&s, &f)) == 1) {
        if (f.field != 1 || f.wire != 2) continue; /* TypeProto.tensor_type; others read as no type */
        Span t = f.bytes;
        Field g;
        while ((r = next_field(&t, &g)) == 1) {
            if (g.field == 1 && g.wire == 0) elem_type = g.value;
            else if (g.field == 2 && g.wire == 2) { /* shape: each dim is dim_value, dim_param or neither */
                has_shape = 1;
                Span shape = g.bytes;
                Field d;
                while ((r = next_field(&shape, &d)) == 1) {
                    if (d.field != 1 || d.wire != 2) continue;
                    Span dim = d.bytes;
                    Field v;
                    int value_set = 0;
                    uint64_t value = 0;
                    while ((r = next_field(&dim, &v)) == 1) {
                        if (v.field == 1 && v.wire == 0) {
                            value = v.value;
                            value_set = 1;
                        } else if (v.field == 2) value_set = 0; /* dim_param: the oneof's last field wins */
                    }
                    if (r < 0) break;
                    known = known && value_set && (int64_t)value >= 0; /* a negative dim is no size */
                    PyObject *item = PyLong_FromLongLong((long long)value);
                    if (item == NULL || PyList_Append(dims, item) < 0) {
                        Py_XDECREF(item);
                        r = -1;
                        break;
                    }
                    Py_DECREF(item);
                }
            }
            if (r < 0) break;
        }
        if (r < 0) break;
    }
    if (r < 0) {
        Py_DECREF(dims);
        return NULL;
    }
    if (!has_shape || !known) {
        Py_DECREF(dims);
        return Py_BuildValue("(KO)", (unsigned long long)elem_type, Py_None);
    }
    return Py_BuildValue("(KN)", (unsigned long long)elem_type, PyList_AsTuple(dims));
}

/* ValueInfoProto: (name, type bytes). */
static int read_value_info(Span v, Span *name, Span *type) {
    Span s = v;
    Field f;
    int r;
    name->p = name->end = v.p;
    type->p = type->end = v.p;
    while ((r = next_field(&s, &f)) == 1) {
        if (f.field == 1 && f.wire == 2) *name = f.bytes;
        else if (f.field == 2 && f.wire == 2) *type = f.bytes;
    }
    return r;
}

static int bytes_span(PyObject *arg, Span *s) {
    char *data;
    Py_ssize_t length;
    if (PyBytes_AsStringAndSize(arg, &data, &length) < 0) return -1;
    s->p = (const uint8_t *)data;
    s->end = s->p + length;
    return 0;
}

static PyObject *graph_contents(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *graph_bytes;
    long long small;
    PyTypeObject *node_type, *initializer_type;
    if (!PyArg_ParseTuple(args, "SLO!O!", &graph_bytes, &small, &PyType_Type, &node_type, &PyType_Type,
                          &initializer_type))
        return NULL;
    if (!is_record_type(node_type, "graph_contents") || !is_record_type(initializer_type, "graph_contents"))
        return NULL;
    Span s;
    if (bytes_span(graph_bytes, &s) < 0) return NULL;
    PyObject *nodes = PyList_New(0), *initializers = PyList_New(0), *raw = PyList_New(0);
    SharedTexts cache = {0};
    Field f;
    int r = nodes && initializers && raw ? 0 : -1;
    Py_ssize_t index = 0;
    while (r >= 0 && (r = next_field(&s, &f)) == 1) {
        if (f.wire != 2 || (f.field != 1 && f.field != 5)) continue; /* GraphProto.node, .initializer */
        PyObject *item = f.field == 1 ? read_node(f.bytes, index++, &cache, raw, node_type)
                                      : read_initializer(f.bytes, small, initializer_type);
        if (item == NULL || PyList_Append(f.field == 1 ? nodes : initializers, item) < 0) r = -1;
        Py_XDECREF(item);
    }
    release_shared_texts(&cache);
    if (r < 0) {
        Py_XDECREF(nodes);
        Py_XDECREF(initializers);
        Py_XDECREF(raw);
        return NULL;
    }
    return Py_BuildValue("(NNN)", nodes, initializers, raw);
}

/* A new `tensor_type` (onnxroof.ir.Tensor) holding (name, elem_type, shape, False). */
static PyObject *new_tensor(PyTypeObject *tensor_type, PyObject *name, PyObject *entry) {
    PyObject *tensor = new_record(tensor_type, 4);
    if (tensor == NULL) return NULL;
    PyTuple_SET_ITEM(tensor, 0, Py_NewRef(name));
    PyTuple_SET_ITEM(tensor, 1, Py_NewRef(PyTuple_GET_ITEM(entry, 0)));
    PyTuple_SET_ITEM(tensor, 2, Py_NewRef(PyTuple_GET_ITEM(entry, 1)));
    PyTuple_SET_ITEM(tensor, 3, Py_NewRef(Py_False));
    return tensor;
}

/* Sets shapes[name] = tensor_type(name, elem_type, shape, False) unless the entry has no shape and the name
 * already has one. `types` caches (elem_type, shape) by the type's bytes: tensors of one type share its shape. */
static int put_type(PyObject *shapes, PyObject *types, PyTypeObject *tensor_type, Span name, Span type) {
    PyObject *type_key = PyBytes_FromStringAndSize((const char *)type.p, type.end - type.p);
    if (type_key == NULL) return -1;
    PyObject *entry = PyDict_GetItemWithError(types, type_key);
    if (entry != NULL) Py_INCREF(entry);
    else if (PyErr_Occurred() || (entry = read_type(type)) == NULL || PyDict_SetItem(types, type_key, entry) < 0) {
        Py_DECREF(type_key);
        Py_XDECREF(entry);
        return -1;
    }
    Py_DECREF(type_key);
    PyObject *key = text(name);
    int failed = key == NULL;
    if (!failed) {
        int keep = PyTuple_GET_ITEM(entry, 1) == Py_None ? PyDict_Contains(shapes, key) : 0;
        PyObject *tensor = keep ? NULL : new_tensor(tensor_type, key, entry);
        failed = keep < 0 || (!keep && (tensor == NULL || PyDict_SetItem(shapes, key, tensor) < 0));
        Py_XDECREF(tensor);
    }
    Py_XDECREF(key);
    Py_DECREF(entry);
    return failed ? -1 : 0;
}

static PyObject *value_types(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *graph_bytes;
    Py_ssize_t input_count;
    PyTypeObject *tensor_type;
    if (!PyArg_ParseTuple(args, "SnO!", &graph_bytes, &input_count, &PyType_Type, &tensor_type)) return NULL;
    if (!is_record_type(tensor_type, "value_types")) return NULL;
    Span s;
    if (bytes_span(graph_bytes, &s) < 0) return NULL;
    PyObject *shapes = PyDict_New(), *types = PyDict_New();
    if (shapes == NULL || types == NULL) {
        Py_XDECREF(shapes);
        Py_XDECREF(types);
        return NULL;
    }
    /* Inputs, then value_info, then outputs, as read.value_types takes them, whatever their order on the wire. */
    static const uint32_t order[3] = {11, 13, 12};
    int r = 0;
    for (int pass = 0; pass < 3 && r >= 0; pass++) {
        Span g = s;
        Field f;
        Py_ssize_t seen = 0;
        while ((r = next_field(&g, &f)) == 1) {
            if (f.field != order[pass] || f.wire != 2) continue;
            if (pass == 0 && input_count >= 0 && seen++ >= input_count) continue;
            Span name, type;
            if (read_value_info(f.bytes, &name, &type) < 0 || put_type(shapes, types, tensor_type, name, type) < 0) {
                r = -1;
                break;
            }
        }
    }
    Py_DECREF(types);
    if (r < 0) {
        Py_DECREF(shapes);
        return NULL;
    }
    return shapes;
}

/* A growing byte string for encoding. */
typedef struct {
    char *data;
    Py_ssize_t size, capacity;
} Buffer;

static int reserve(Buffer *b, Py_ssize_t more) {
    if (b->size + more <= b->capacity) return 0;
    Py_ssize_t capacity = (b->size + more) * 2;
    char *data = PyMem_Realloc(b->data, capacity);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->capacity = capacity;
    return 0;
}

static Py_ssize_t varint_size(uint64_t v) {
    Py_ssize_t n = 1;
    while (v > 0x7F) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Writes a varint into reserved space. */
static void put_varint(Buffer *b, uint64_t v) {
    while (v > 0x7F) {
        b->data[b->size++] = (char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    b->data[b->size++] = (char)v;
}

/* The key and length of a length-delimited field (field number below 16) holding `length` bytes. */
static void put_head(Buffer *b, uint32_t field, Py_ssize_t length) {
    b->data[b->size++] = (char)(field << 3 | 2);
    put_varint(b, (uint64_t)length);
}

static Py_ssize_t field_size(Py_ssize_t length) { return 1 + varint_size((uint64_t)length) + length; }

/* One GraphProto.input entry: ValueInfoProto{name, type: TypeProto{tensor_type: {elem_type, shape}}}. */
static int put_typed_input(Buffer *b, PyObject *entry) {
    PyObject *name, *dims;
    unsigned long long dtype;
    if (!PyArg_ParseTuple(entry, "UKO!", &name, &dtype, &PyTuple_Type, &dims)) return -1;
    Py_ssize_t name_length, rank = PyTuple_GET_SIZE(dims), shape = 0;
    const char *name_text = PyUnicode_AsUTF8AndSize(name, &name_length);
    if (name_text == NULL) return -1;
    for (Py_ssize_t k = 0; k < rank; k++) {
        long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(dims, k));
        if (d == -1 && PyErr_Occurred()) return -1;
        shape += field_size(1 + varint_size((uint64_t)d)); /* Dimension{dim_value} */
    }
    Py_ssize_t tensor = 1 + varint_size(dtype) + field_size(shape); /* elem_type, shape */
    Py_ssize_t type = field_size(tensor);                              /* tensor_type */
    Py_ssize_t value_info = field_size(name_length) + field_size(type);
    if (reserve(b, field_size(value_info)) < 0) return -1;
    put_head(b, 11, value_info); /* GraphProto.input */
    put_head(b, 1, name_length);
    memcpy(b->data + b->size, name_text, name_length);
    b->size += name_length;
    put_head(b, 2, type);
    put_head(b, 1, tensor);
    b->data[b->size++] = 1 << 3; /* elem_type, a varint */
    put_varint(b, dtype);
    put_head(b, 2, shape);
    for (Py_ssize_t k = 0; k < rank; k++) {
        uint64_t d = (uint64_t)PyLong_AsLongLong(PyTuple_GET_ITEM(dims, k));
        put_head(b, 1, 1 + varint_size(d));
        b->data[b->size++] = 1 << 3; /* dim_value, a varint */
        put_varint(b, d);
    }
    return 0;
}

static PyObject *typed_inputs(PyObject *Py_UNUSED(self), PyObject *entries) {
    PyObject *items = PySequence_Fast(entries, "typed_inputs expects a list of (name, elem_type, dims)");
    if (items == NULL) return NULL;
    Buffer b = {NULL, 0, 0};
    PyObject *result = NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(items);
    Py_ssize_t k = 0;
    for (; k < count; k++)
        if (put_typed_input(&b, PySequence_Fast_GET_ITEM(items, k)) < 0) break;
    if (k == count) result = PyBytes_FromStringAndSize(b.data ? b.data : "", b.size);
    PyMem_Free(b.data);
    Py_DECREF(items);
    return result;
}

/* Appends `length` bytes. */
static int put_bytes(Buffer *b, const uint8_t *p, Py_ssize_t length) {
    if (reserve(b, length) < 0) return -1;
    memcpy(b->data + b->size, p, length);
    b->size += length;
    return 0;
}

/* Appends a length-delimited field holding another buffer's bytes. */
static int put_message(Buffer *b, uint32_t field, const Buffer *payload) {
    if (reserve(b, field_size(payload->size)) < 0) return -1;
    put_head(b, field, payload->size);
    if (payload->size > 0) memcpy(b->data + b->size, payload->data, payload->size);
    b->size += payload->size;
    return 0;
}

/* One dim of a tensor's element count, as math.prod counts them but capped just above `small`. */
static void count_dim(long long d, long long small, long long *elements, int *zero, int *negative) {
    if (d < 0) *negative = 1;
    else if (d == 0) *zero = 1;
    else if (*elements <= small) *elements = d > small ? small + 1 : *elements * d;
}

/* Whether a TensorProto keeps its data in the model and has more than `small` elements: the weights that
 * drop_weight_bytes strips (a tensor with a negative dim is left as it is). 1, 0, or -1 on an error. */
static int large_inline_tensor(Span t, long long small) {
    Span s = t;
    Field f;
    int r, zero = 0, negative = 0;
    uint64_t location = 0;
    long long elements = 1;
    while ((r = next_field(&s, &f)) == 1) {
        if (f.field == 14 && f.wire == 0) location = f.value;
        if (f.field != 1) continue; /* dims: a varint each, or packed */
        if (f.wire == 0) count_dim((long long)f.value, small, &elements, &zero, &negative);
        else if (f.wire == 2) {
            Span packed = f.bytes;
            uint64_t v;
            while (packed.p < packed.end) {
                if (read_varint(&packed, &v) < 0) return -1;
                count_dim((long long)v, small, &elements, &zero, &negative);
            }
        }
    }
    if (r < 0) return -1;
    return location != 1 && !zero && !negative && elements > small; /* 1: TensorProto.EXTERNAL */
}

/* What a rewrite does with one field: 0 to copy it as it is, 1 when the visitor wrote what replaces it (or
 * nothing, to drop it), -1 on an error. */
typedef int (*FieldVisitor)(const Field *f, Buffer *out, const void *context);

/* A message's fields into `out`, each copied as it is unless `visit` replaces it. */
static int rewrite_fields(Span message, Buffer *out, FieldVisitor visit, const void *context) {
    Span s = message;
    Field f;
    int r;
    const uint8_t *start = s.p;
    while ((r = next_field(&s, &f)) == 1) {
        int replaced = visit(&f, out, context);
        if (replaced < 0 || (!replaced && put_bytes(out, start, s.p - start) < 0)) return -1;
        start = s.p;
    }
    return r;
}

typedef struct {
    long long small;
    Span marker;
} Stripping;

/* Drops a TensorProto's data fields (float_data, int32_data, string_data, int64_data, raw_data, double_data,
 * uint64_data) and its data_location. */
static int drop_tensor_data(const Field *f, Buffer *Py_UNUSED(out), const void *Py_UNUSED(context)) {
    uint32_t n = f->field;
    return n == 4 || n == 5 || n == 6 || n == 7 || n == 9 || n == 10 || n == 11 || n == 14;
}

/* A TensorProto less its data and marked as external data at the marker, as drop_weight_bytes leaves it. */
static int put_stripped_tensor(Buffer *b, Span t, Span marker) {
    Buffer out = {NULL, 0, 0};
    Py_ssize_t marker_length = marker.end - marker.p;
    Py_ssize_t entry = field_size(8) + field_size(marker_length); /* StringStringEntryProto{key, value} */
    int r = rewrite_fields(t, &out, drop_tensor_data, NULL);
    if (r == 0 && reserve(&out, field_size(entry) + 2) == 0) {
        put_head(&out, 13, entry); /* external_data */
        put_head(&out, 1, 8);
        memcpy(out.data + out.size, "location", 8);
        out.size += 8;
        put_head(&out, 2, marker_length);
        memcpy(out.data + out.size, marker.p, marker_length);
        out.size += marker_length;
        out.data[out.size++] = 14 << 3; /* data_location, a varint: EXTERNAL */
        out.data[out.size++] = 1;
        r = put_message(b, 5, &out);
    } else r = -1;
    PyMem_Free(out.data);
    return r;
}

/* Replaces a large inline GraphProto.initializer by its stripped form. */
static int strip_initializer(const Field *f, Buffer *out, const void *context) {
    const Stripping *how = context;
    if (f->field != 5 || f->wire != 2) return 0;
    int strip = large_inline_tensor(f->bytes, how->small);
    if (strip <= 0) return strip;
    return put_stripped_tensor(out, f->bytes, how->marker) < 0 ? -1 : 1;
}

/* Replaces ModelProto.graph by the graph with its large inline initializers stripped. */
static int strip_graph(const Field *f, Buffer *out, const void *context) {
    if (f->field != 7 || f->wire != 2) return 0;
    Buffer graph = {NULL, 0, 0};
    int r = rewrite_fields(f->bytes, &graph, strip_initializer, context);
    if (r == 0) r = put_message(out, 7, &graph);
    PyMem_Free(graph.data);
    return r < 0 ? -1 : 1;
}

/* strip_weight_bytes(model, small, marker): a serialized ModelProto (any buffer: a memory-mapped file) with the
 * data of every initializer of more than `small` elements left out, as drop_weight_bytes leaves the parsed
 * model, before anything parses it: the weights' bytes are never copied, nor even read from a mapped file.
 * Every other field is kept as it is. */
static PyObject *strip_weight_bytes(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer model;
    PyObject *marker_bytes;
    Stripping how;
    if (!PyArg_ParseTuple(args, "y*LS", &model, &how.small, &marker_bytes)) return NULL;
    PyObject *result = NULL;
    if (bytes_span(marker_bytes, &how.marker) == 0) {
        Span s = {(const uint8_t *)model.buf, (const uint8_t *)model.buf + model.len};
        Buffer out = {NULL, 0, 0};
        if (rewrite_fields(s, &out, strip_graph, &how) == 0)
            result = PyBytes_FromStringAndSize(out.data ? out.data : "", out.size);
        PyMem_Free(out.data);
    }
    PyBuffer_Release(&model);
    return result;
}

static PyMethodDef methods[] = {
    {"graph_contents", graph_contents, METH_VARARGS,
     "graph_contents(graph_bytes, small, node_type, initializer_type) -> (nodes, initializers, raw attributes) of a"
     " serialized GraphProto."},
    {"value_types", value_types, METH_VARARGS,
     "value_types(graph_bytes, input_count, tensor_type) -> {name: tensor_type(name, elem_type, shape or None, False)}"
     " of a serialized GraphProto."},
    {"strip_weight_bytes", strip_weight_bytes, METH_VARARGS,
     "strip_weight_bytes(model, small, marker) -> the serialized model, its large inline weights' data left out."},
    {"typed_inputs", typed_inputs, METH_O,
     "typed_inputs([(name, elem_type, dims), ...]) -> the serialized GraphProto.input fields of typed tensors."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "onnxroof.load._wire", NULL, -1, methods};

PyMODINIT_FUNC PyInit__wire(void) { return PyModule_Create(&module); }
