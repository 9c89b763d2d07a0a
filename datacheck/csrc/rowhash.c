/* datacheck._rowhash: compiled kernels of datacheck/io/rowhash.py (built at install by setuptools;
 * loaded by datacheck/io/native.py). Plain CPython C API and the buffer protocol; XXH3-128 from the
 * vendored xxhash.h (0.8.2, BSD-2-Clause, LICENSE.xxhash).
 *
 * list_digests(values, offsets, kind, itemsize, out): per row i, the XXH3-128 (seed 0) digest, as
 *   its 16 canonical (big-endian) bytes, of the values values[offsets[i]:offsets[i + 1]] (elements
 *   of `itemsize` bytes, in the host's byte order) brought to 8 bytes little-endian each:
 *     kind 'i' / 'u': signed / unsigned integers (itemsize 1, 2, 4, 8) widened to int64 (a uint64
 *       keeps its 8 bytes);
 *     kind 'f': floats (itemsize 4, 8) as float64, every NaN as 0x7ff8000000000000, -0.0 as 0.0;
 *     kind 'd': floats (itemsize 4, 8) whose values are integers within int64, as that int64 (a
 *       value that is not raises ValueError).
 *   offsets: int64 (n + 1 of them, element indices); out: writable, n * 16 bytes. The offsets must
 *   be non-decreasing, the first >= 0, the last <= the number of values: else ValueError (no byte
 *   outside the buffers is read). The loop runs without the GIL. The values are widened on the fly
 *   into a stack buffer (a row longer than it is hashed by XXH3's streaming state: the same digest).
 *
 * The digests of inputs over 240 bytes are computed by XXH3's AVX2 loop where the CPU has AVX2
 * (x86-64, gcc or clang: compiled beside the baseline SSE2 loop, chosen at import), else by the
 * baseline's: the same digests.
 *
 * fixed_rows(data, width, out): per row of `width` bytes of `data` (len(data) a multiple of width),
 *   XXH3-128 (seed 0) as two uint64 in the host's order: out[2i] = high 64 bits, out[2i + 1] = low
 *   64 bits (the polars-hash plugin's UInt128 value high * 2**64 + low). out: n * 16 bytes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define XXH_INLINE_ALL
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* XXH3's AVX2 loop compiled beside the baseline's (SSE2), taken where the CPU has AVX2 (as
 * xxHash's own xxh_x86dispatch.c does): the same digests, twice the vector width */
#define DC_AVX2 1
#define XXH_DISPATCH_AVX2 1
#define XXH_TARGET_AVX2 __attribute__((__target__("avx2")))
#include <immintrin.h>
#endif
#include "xxhash.h"

#ifdef DC_AVX2
static int use_avx2 = 0;

__attribute__((__target__("avx2"))) static XXH128_hash_t hash_long_avx2(const void *input, size_t len) {
    return XXH3_hashLong_128b_internal(input, len, XXH3_kSecret, sizeof(XXH3_kSecret),
                                       XXH3_accumulate_avx2, XXH3_scrambleAcc_avx2);
}

/* XXH3_128bits(input, len) (seed 0), its long inputs (over 240 bytes) on AVX2 where the CPU has it */
static inline XXH128_hash_t xxh128(const void *input, size_t len) {
    if (use_avx2 && len > XXH3_MIDSIZE_MAX) return hash_long_avx2(input, len);
    return XXH3_128bits(input, len);
}
#else
#define xxh128 XXH3_128bits
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "datacheck._rowhash: the digests are of little-endian bytes; a big-endian host takes the numpy path"
#endif

/* values widened per step: 8 KiB of the stack, in L1 */
#define CHUNK 1024

enum { ERR_NONE = 0, ERR_OFFSETS = 1, ERR_NOT_INTEGRAL = 2 };

static const double I64_LO = -9223372036854775808.0; /* -2**63 */
static const double I64_HI = 9223372036854775808.0;  /* 2**63 */

static inline uint64_t canonical_float(double v) {
    uint64_t bits;
    if (v != v) return UINT64_C(0x7ff8000000000000);
    v += 0.0; /* -0.0 + 0.0 is 0.0 */
    memcpy(&bits, &v, 8);
    return bits;
}

/* widen `count` values at `src` of kind/itemsize into dst (8 bytes each); returns an ERR_ code */
static inline int widen(const char *src, Py_ssize_t count, char kind, int itemsize, uint64_t *dst) {
    Py_ssize_t t;
/* dst[t] = the t-th value of type T at src (unaligned reads), as int64 */
#define WIDEN(T)                                          \
    do {                                                  \
        T x;                                              \
        for (t = 0; t < count; t++) {                     \
            memcpy(&x, src + sizeof(T) * t, sizeof(T));   \
            dst[t] = (uint64_t)(int64_t)x;                \
        }                                                 \
    } while (0)
    switch (kind) {
    case 'i':
        switch (itemsize) {
        case 1: WIDEN(int8_t); break;
        case 2: WIDEN(int16_t); break;
        case 4: WIDEN(int32_t); break;
        default: memcpy(dst, src, (size_t)count * 8); break;
        }
        return ERR_NONE;
    case 'u':
        switch (itemsize) {
        case 1: WIDEN(uint8_t); break;
        case 2: WIDEN(uint16_t); break;
        case 4: WIDEN(uint32_t); break;
        default: memcpy(dst, src, (size_t)count * 8); break;
        }
        return ERR_NONE;
    case 'f':
        if (itemsize == 4) {
            float x;
            for (t = 0; t < count; t++) { memcpy(&x, src + 4 * t, 4); dst[t] = canonical_float((double)x); }
        } else {
            double x;
            for (t = 0; t < count; t++) { memcpy(&x, src + 8 * t, 8); dst[t] = canonical_float(x); }
        }
        return ERR_NONE;
    default: /* 'd' */
        for (t = 0; t < count; t++) {
            double v;
            if (itemsize == 4) { float x; memcpy(&x, src + 4 * t, 4); v = (double)x; }
            else memcpy(&v, src + 8 * t, 8);
            if (!(v >= I64_LO && v < I64_HI) || v != (double)(int64_t)v) return ERR_NOT_INTEGRAL;
            dst[t] = (uint64_t)(int64_t)v;
        }
        return ERR_NONE;
    }
#undef WIDEN
}

static int check_buffer(Py_buffer *b, const char *name) {
    if (!PyBuffer_IsContiguous(b, 'C')) {
        PyErr_Format(PyExc_ValueError, "%s: a C-contiguous buffer is needed", name);
        return -1;
    }
    return 0;
}

static PyObject *list_digests(PyObject *self, PyObject *args) {
    Py_buffer values, offsets, out;
    int kind_c, itemsize;
    PyObject *ret = NULL;
    if (!PyArg_ParseTuple(args, "y*y*Ciw*", &values, &offsets, &kind_c, &itemsize, &out)) return NULL;
    char kind = (char)kind_c;
    if (check_buffer(&values, "values") < 0 || check_buffer(&offsets, "offsets") < 0 || check_buffer(&out, "out") < 0)
        goto done;
    int ok_kind = ((kind == 'i' || kind == 'u') && (itemsize == 1 || itemsize == 2 || itemsize == 4 || itemsize == 8))
                  || ((kind == 'f' || kind == 'd') && (itemsize == 4 || itemsize == 8));
    if (!ok_kind) {
        PyErr_Format(PyExc_ValueError, "list_digests: unsupported kind %c of %d bytes", kind, itemsize);
        goto done;
    }
    if (offsets.len % 8 != 0 || offsets.len < 8) {
        PyErr_SetString(PyExc_ValueError, "list_digests: offsets must be n + 1 >= 1 int64 values");
        goto done;
    }
    Py_ssize_t n = offsets.len / 8 - 1;
    if (out.len != n * 16) {
        PyErr_Format(PyExc_ValueError, "list_digests: out holds %zd bytes, %zd rows need %zd", out.len, n, n * 16);
        goto done;
    }
    Py_ssize_t count = values.len / itemsize; /* whole values in the buffer */
    const char *vals = (const char *)values.buf;
    const char *offb = (const char *)offsets.buf;
    unsigned char *dst = (unsigned char *)out.buf;
    int err = ERR_NONE;
    Py_BEGIN_ALLOW_THREADS
    uint64_t buf[CHUNK];
    XXH3_state_t state;
    int64_t lo, hi;
    memcpy(&lo, offb, 8);
    if (lo < 0 || lo > count) err = ERR_OFFSETS;
    for (Py_ssize_t i = 0; i < n && err == ERR_NONE; i++) {
        memcpy(&hi, offb + 8 * (i + 1), 8);
        if (hi < lo || hi > count) { err = ERR_OFFSETS; break; }
        Py_ssize_t len = (Py_ssize_t)(hi - lo);
        const char *src = vals + (Py_ssize_t)lo * itemsize;
        XXH128_hash_t h;
        if (itemsize == 8 && (kind == 'i' || kind == 'u')) {
            h = xxh128(src, (size_t)len * 8);
        } else if (len <= CHUNK) {
            err = widen(src, len, kind, itemsize, buf);
            if (err != ERR_NONE) break;
            h = xxh128(buf, (size_t)len * 8);
        } else {
            XXH3_INITSTATE(&state);
            XXH3_128bits_reset(&state);
            for (Py_ssize_t at = 0; at < len; at += CHUNK) {
                Py_ssize_t m = len - at < CHUNK ? len - at : CHUNK;
                err = widen(src + at * itemsize, m, kind, itemsize, buf);
                if (err != ERR_NONE) break;
                XXH3_128bits_update(&state, buf, (size_t)m * 8);
            }
            if (err != ERR_NONE) break;
            h = XXH3_128bits_digest(&state);
        }
        XXH128_canonicalFromHash((XXH128_canonical_t *)(dst + 16 * i), h);
        lo = hi;
    }
    Py_END_ALLOW_THREADS
    if (err == ERR_OFFSETS) {
        PyErr_SetString(PyExc_ValueError, "list_digests: offsets out of order or beyond the values");
        goto done;
    }
    if (err == ERR_NOT_INTEGRAL) {
        PyErr_SetString(PyExc_ValueError, "list_digests: kind 'd' given a value that is no integer within int64");
        goto done;
    }
    Py_INCREF(Py_None);
    ret = Py_None;
done:
    PyBuffer_Release(&values);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&out);
    return ret;
}

static PyObject *fixed_rows(PyObject *self, PyObject *args) {
    Py_buffer data, out;
    Py_ssize_t width;
    PyObject *ret = NULL;
    if (!PyArg_ParseTuple(args, "y*nw*", &data, &width, &out)) return NULL;
    if (check_buffer(&data, "data") < 0 || check_buffer(&out, "out") < 0) goto done;
    if (width <= 0 || data.len % width != 0) {
        PyErr_SetString(PyExc_ValueError, "fixed_rows: width must be > 0 and divide the data's length");
        goto done;
    }
    Py_ssize_t n = data.len / width;
    if (out.len != n * 16) {
        PyErr_Format(PyExc_ValueError, "fixed_rows: out holds %zd bytes, %zd rows need %zd", out.len, n, n * 16);
        goto done;
    }
    const unsigned char *src = (const unsigned char *)data.buf;
    uint64_t *dst = (uint64_t *)out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        XXH128_hash_t h = xxh128(src + i * width, (size_t)width);
        uint64_t pair[2] = {h.high64, h.low64};
        memcpy(dst + 2 * i, pair, 16);
    }
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    ret = Py_None;
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    return ret;
}

/* _avx2(flag=None): whether XXH3's AVX2 loop is taken (False where the CPU or the build lacks it);
 * with flag, take it (only where the CPU has it) or not: the tests run both loops. */
static PyObject *avx2(PyObject *self, PyObject *args) {
    PyObject *flag = Py_None;
    if (!PyArg_ParseTuple(args, "|O", &flag)) return NULL;
#ifdef DC_AVX2
    if (flag != Py_None) {
        int on = PyObject_IsTrue(flag);
        if (on < 0) return NULL;
        use_avx2 = on && __builtin_cpu_supports("avx2");
    }
    return PyBool_FromLong(use_avx2);
#else
    Py_RETURN_FALSE;
#endif
}

static PyMethodDef methods[] = {
    {"_avx2", avx2, METH_VARARGS,
     "_avx2(flag=None): whether XXH3's AVX2 loop is taken; with flag, take it (where the CPU has it) or not."},
    {"list_digests", list_digests, METH_VARARGS,
     "list_digests(values, offsets, kind, itemsize, out): per row XXH3-128 big-endian digests of its "
     "values as 8 little-endian bytes each (see datacheck/csrc/rowhash.c)."},
    {"fixed_rows", fixed_rows, METH_VARARGS,
     "fixed_rows(data, width, out): per row of width bytes XXH3-128 as (high, low) uint64 pairs."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rowhash", "datacheck's compiled rowhash kernels (datacheck/io/native.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__rowhash(void) {
#ifdef DC_AVX2
    __builtin_cpu_init();
    use_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
    PyObject *m = PyModule_Create(&module);
    /* ABI 2: the first kernels (datacheck/io/native.py loads no module of another ABI) */
    if (m != NULL && PyModule_AddIntConstant(m, "ABI", 2) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
