/* datacheck._scan: compiled kernels (built at install by setuptools; see datacheck/io/native.py).
 *
 * dense_scan: the comparisons of datacheck.checks._flat._dense_scan (its numpy code is the reference
 * and the fallback; the property tests of tests/unit/checks/test_flat_native.py compare the two) in
 * one pass over the flat buffers, by blocks of BLOCK positions held in the CPU cache:
 *
 *   1. one branch-free loop over the block (vectorized by the compiler; pass1): sup0 and real
 *      written into the caller's arrays, and one flag byte per position: bit 0 the position is a
 *      hit (exact), bit 1 it may belong to one of the rare lists (off, pad_id, pad_label, neg, high);
 *   2. the flagged positions (8 flag bytes read at a time; none on clean data but the hits) are
 *      looked at one by one: a hit is appended, and at bit 1 each rare list's condition is evaluated
 *      exactly on the buffers' own values, so each list is ascending and exact.
 *
 * Values: the kernel takes the integer types int8..int64 and uint8..uint32 (bool too for masks),
 * each of which int64 holds, and constants that fit int64, so a comparison made in int64 is numpy's
 * (NumPy >= 2 compares integers with Python ints exactly). Pass 1 reads a buffer as int32 where that
 * is exact: its type fits int32 and so do the constants it is compared with, or it is int64 and every
 * value of the block fits int32 (narrow64: token ids and -100); else as int64 (converted block by
 * block into scratch arrays where the type is another). Pass 2 reads the buffers' own values.
 *
 * periodic_rows: datacheck.checks._flat.periodic_flat (see there, and below).
 *
 * The GIL is released around each pass; every buffer's type, dimension, contiguity and length is
 * checked against the segments (offsets) before it, so no element outside a buffer is ever read. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* x86-64 Linux with glibc (ifunc): the block passes are compiled twice, for AVX2 (64-bit integer
 * comparisons in vectors) and for the baseline (SSE2 has none: those loops stay scalar); the loader
 * picks one at run time. Elsewhere (musl, macOS, Windows, other CPUs) or with -DDC_NO_CLONES: once. */
#if !defined(DC_NO_CLONES) && defined(__x86_64__) && defined(__GNUC__) && defined(__linux__) && \
    defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define DC_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef DC_CLONES /* kept out of line: GCC vectorizes over restrict parameters, not once inlined */
#if defined(__GNUC__)
#define DC_CLONES __attribute__((noinline))
#else
#define DC_CLONES
#endif
#endif
#if defined(_MSC_VER) && !defined(restrict)
#define restrict __restrict
#endif

/* positions of one block: 2 KiB of flags, 16 KiB of int64 ids and labels each */
#define BLOCK 2048

enum kind { K_BAD = 0, K_I8, K_I16, K_I32, K_I64, K_U8, K_U16, K_U32, K_BOOL };

/* A view of one 1-D buffer argument (None allowed where `optional`). */
typedef struct {
    Py_buffer view;
    int held;         /* view must be released */
    enum kind kind;
    const char *data; /* NULL: the argument was None */
    Py_ssize_t len;
} arg_t;

static enum kind kind_of(const Py_buffer *v) {
    const char *f = v->format ? v->format : "B";
    if (*f == '@' || *f == '=') {
        f++;
    } else if (*f == '<' || *f == '>' || *f == '!') {
        const uint16_t one = 1;
        int little = *(const uint8_t *)&one == 1;
        if ((*f == '<') != little) {
            return K_BAD; /* not the machine's byte order */
        }
        f++;
    }
    if (f[0] == '\0' || f[1] != '\0') {
        return K_BAD;
    }
    int signed_ = 0;
    switch (f[0]) {
    case '?':
        return v->itemsize == 1 ? K_BOOL : K_BAD;
    case 'b': case 'h': case 'i': case 'l': case 'q':
        signed_ = 1;
        break;
    case 'B': case 'H': case 'I': case 'L': case 'Q':
        break;
    default:
        return K_BAD;
    }
    switch (v->itemsize) {
    case 1: return signed_ ? K_I8 : K_U8;
    case 2: return signed_ ? K_I16 : K_U16;
    case 4: return signed_ ? K_I32 : K_U32;
    case 8: return signed_ ? K_I64 : K_BAD; /* uint64: int64 does not hold it */
    default: return K_BAD;
    }
}

/* Fills `a` from `obj`: a 1-D contiguous buffer of an integer type (`want_bool`: of bool; `writable`:
 * writable). Returns 0, or -1 with ValueError set. */
static int get_arg(PyObject *obj, arg_t *a, const char *name, int optional, int want_bool, int writable) {
    memset(a, 0, sizeof(*a));
    if (obj == Py_None) {
        if (optional) {
            return 0;
        }
        PyErr_Format(PyExc_ValueError, "datacheck._scan: %s must be an array, not None", name);
        return -1;
    }
    int flags = PyBUF_FORMAT | PyBUF_STRIDES | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &a->view, flags) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "datacheck._scan: %s must be a%s 1-D buffer", name, writable ? " writable" : "");
        return -1;
    }
    a->held = 1;
    if (a->view.ndim != 1 || a->view.shape == NULL) {
        PyErr_Format(PyExc_ValueError, "datacheck._scan: %s must have one dimension (it has %d)", name, a->view.ndim);
        return -1;
    }
    a->len = a->view.shape[0];
    if (a->len > 1 && a->view.strides != NULL && a->view.strides[0] != a->view.itemsize) {
        PyErr_Format(PyExc_ValueError, "datacheck._scan: %s must be contiguous (stride %zd, item size %zd)", name,
                     a->view.strides[0], a->view.itemsize);
        return -1;
    }
    if (a->view.itemsize <= 0 || a->view.len != a->len * a->view.itemsize) {
        PyErr_Format(PyExc_ValueError, "datacheck._scan: %s holds %zd bytes for %zd items of %zd bytes", name,
                     a->view.len, a->len, a->view.itemsize);
        return -1;
    }
    a->kind = kind_of(&a->view);
    if (a->kind == K_BAD || (want_bool && a->kind != K_BOOL)) {
        PyErr_Format(PyExc_ValueError, "datacheck._scan: %s has an unsupported type (format '%s', item size %zd; %s)",
                     name, a->view.format ? a->view.format : "B", a->view.itemsize,
                     want_bool ? "bool wanted" : "int8..int64, uint8..uint32 or bool wanted");
        return -1;
    }
    a->data = (const char *)a->view.buf;
    return 0;
}

static void release(arg_t *a) {
    if (a->held) {
        PyBuffer_Release(&a->view);
        a->held = 0;
    }
}

/* dst[j] = src[start + j] as int64, j < m */
static void load64(const arg_t *a, Py_ssize_t start, Py_ssize_t m, int64_t *restrict dst) {
    Py_ssize_t j;
#define LOAD(T)                                  \
    {                                            \
        const T *restrict s = (const T *)a->data + start; \
        for (j = 0; j < m; j++) dst[j] = (int64_t)s[j]; \
    }                                            \
    break;
    switch (a->kind) {
    case K_I8: LOAD(int8_t)
    case K_I16: LOAD(int16_t)
    case K_I32: LOAD(int32_t)
    case K_I64: LOAD(int64_t)
    case K_U8: case K_BOOL: LOAD(uint8_t)
    case K_U16: LOAD(uint16_t)
    case K_U32: LOAD(uint32_t)
    default: break;
    }
#undef LOAD
}

/* the values of `a` at [start, start + m) as int64: the buffer itself when it is int64, else `tmp` */
static const int64_t *as64(const arg_t *a, Py_ssize_t start, Py_ssize_t m, int64_t *tmp) {
    if (a->kind == K_I64) {
        return (const int64_t *)a->data + start;
    }
    load64(a, start, m, tmp);
    return tmp;
}

/* dst[j] = src[start + j] as int32, j < m (types int32 holds: int8, int16, int32, uint8, uint16) */
static void load32(const arg_t *a, Py_ssize_t start, Py_ssize_t m, int32_t *restrict dst) {
    Py_ssize_t j;
#define LOAD(T)                                                 \
    {                                                           \
        const T *restrict s = (const T *)a->data + start;       \
        for (j = 0; j < m; j++) dst[j] = (int32_t)s[j];         \
    }                                                           \
    break;
    switch (a->kind) {
    case K_I8: LOAD(int8_t)
    case K_I16: LOAD(int16_t)
    case K_I32: LOAD(int32_t)
    case K_U8: case K_BOOL: LOAD(uint8_t)
    case K_U16: LOAD(uint16_t)
    default: break;
    }
#undef LOAD
}

static const int32_t *as32(const arg_t *a, Py_ssize_t start, Py_ssize_t m, int32_t *tmp) {
    if (a->kind == K_I32) {
        return (const int32_t *)a->data + start;
    }
    load32(a, start, m, tmp);
    return tmp;
}

/* dst[j] = (int32)src[j], j < m; 1 when every value fits int32 (then dst holds them exactly) */
DC_CLONES static int narrow64(const int64_t *restrict src, Py_ssize_t m, int32_t *restrict dst) {
    int64_t bad = 0;
    for (Py_ssize_t j = 0; j < m; j++) {
        dst[j] = (int32_t)src[j];
        bad |= src[j] ^ (int64_t)dst[j];
    }
    return bad == 0;
}

/* the value of `a` at i as int64 */
static int64_t value_at(const arg_t *a, Py_ssize_t i) {
    switch (a->kind) {
    case K_I8: return ((const int8_t *)a->data)[i];
    case K_I16: return ((const int16_t *)a->data)[i];
    case K_I32: return ((const int32_t *)a->data)[i];
    case K_I64: return ((const int64_t *)a->data)[i];
    case K_U8: case K_BOOL: return ((const uint8_t *)a->data)[i];
    case K_U16: return ((const uint16_t *)a->data)[i];
    case K_U32: return ((const uint32_t *)a->data)[i];
    default: return 0;
    }
}

/* the kind holds values int32 holds */
static int narrow(enum kind k) {
    return k == K_I8 || k == K_I16 || k == K_I32 || k == K_U8 || k == K_U16 || k == K_BOOL;
}

static int fits32(int64_t x) {
    return x >= INT32_MIN && x <= INT32_MAX;
}

/* r[j] = A[j] == 1 and ok[j], z[j] = A[j] == 0 and ok[j] (j < m): bytes (int8, uint8, bool: 0 and 1 are the same bytes) */
DC_CLONES static void mask8(const uint8_t *restrict A, const uint8_t *restrict ok, uint8_t *restrict r,
                            uint8_t *restrict z, Py_ssize_t m) {
    for (Py_ssize_t j = 0; j < m; j++) {
        r[j] = (uint8_t)((A[j] == 1) & (ok[j] != 0));
        z[j] = (uint8_t)((A[j] == 0) & (ok[j] != 0));
    }
}

/* the same over int64 values */
DC_CLONES static void mask64(const int64_t *restrict A, const uint8_t *restrict ok, uint8_t *restrict r,
                             uint8_t *restrict z, Py_ssize_t m) {
    for (Py_ssize_t j = 0; j < m; j++) {
        r[j] = (uint8_t)((A[j] == 1) & (ok[j] != 0));
        z[j] = (uint8_t)((A[j] == 0) & (ok[j] != 0));
    }
}

/* r, z of the mask `a` at [start, start + m) with validity ok (see mask8) */
static void mask_of(const arg_t *a, Py_ssize_t start, Py_ssize_t m, const uint8_t *ok, uint8_t *r, uint8_t *z,
                    int64_t *tmp) {
    if (a->view.itemsize == 1) {
        mask8((const uint8_t *)a->data + start, ok, r, z, m);
    } else {
        mask64(as64(a, start, m, tmp), ok, r, z, m);
    }
}

/* a growable list of int64 positions */
typedef struct {
    int64_t *p;
    Py_ssize_t n, cap;
} list_t;

/* room for `extra` more positions in `l`; -1: no memory */
static int reserve(list_t *l, Py_ssize_t extra) {
    if (l->cap - l->n >= extra) {
        return 0;
    }
    Py_ssize_t cap = l->cap ? 2 * l->cap : 4096;
    while (cap - l->n < extra) {
        cap *= 2;
    }
    int64_t *p = (int64_t *)realloc(l->p, (size_t)cap * sizeof(int64_t));
    if (p == NULL) {
        return -1;
    }
    l->p = p;
    l->cap = cap;
    return 0;
}

enum { L_HITS, L_OFF, L_PAD_ID, L_PAD_LABEL, L_NEG, L_HIGH, N_LISTS };

typedef struct {
    int64_t a, b, sl, sa;
} seg_t;

typedef struct {
    arg_t ids, ids_ok, lab, lab_ok, att, att_ok, sup0, real;
    int64_t ign, pad, bound;
    int has_pad, has_bound, shifted;
    int lab32, ids32; /* the block pass reads the labels / ids as int32 (their type and the constants fit it) */
    int consts32;     /* ign and bound fit int32 */
    int idconsts32;   /* pad and the first four wanted ids fit int32 */
    int64_t *wanted;
    Py_ssize_t n_wanted;
    seg_t *segs;
    Py_ssize_t n_segs;
    list_t out[N_LISTS];
} job_t;

/* scratch of one block */
typedef struct {
    int64_t ids[BLOCK + 1], lab[BLOCK], att[BLOCK];
    int32_t ids32[BLOCK + 1], lab32[BLOCK];
    uint8_t flag[BLOCK], z[BLOCK], ones[BLOCK + 1], zeros[BLOCK];
} scratch_t;

/* The flags of positions [0, last) of a block (see block): `SH` the shifted convention (the label
 * against the next id), `NW` wanted ids compared (the first NW of W). Every value is an int64 lane
 * (a byte only when stored), so the compiler packs one result per position, not one per comparison.
 * A function of its own per variant: GCC vectorizes a loop over restrict parameters (not over
 * restrict locals: it checks every pair of pointers for overlap instead) and drops the absent rules. */
#define PASS1(NAME, LT, IT, SH, NW)                                                                               \
    DC_CLONES static void NAME(const void *L_, const void *I_, const uint8_t *restrict LOK,                           \
                               const uint8_t *restrict IOK, const uint8_t *restrict R, const uint8_t *restrict Z,   \
                               uint8_t *restrict sup, uint8_t *restrict F, Py_ssize_t last, int64_t ign_,           \
                               int64_t bound_, int64_t pad_, int64_t b_on, int64_t p_on, const int64_t *W) {        \
        const LT *restrict L = (const LT *)L_;                                                                     \
        const IT *restrict I = (const IT *)I_;                                                                     \
        const LT ign = (LT)ign_, bound = (LT)bound_, bon = (LT)b_on;                                               \
        const IT pon = (IT)p_on;                                                                                   \
        const IT pad = (IT)pad_, w0 = (IT)W[0], w1 = (IT)W[1], w2 = (IT)W[2], w3 = (IT)W[3];                       \
        (void)w0, (void)w1, (void)w2, (void)w3;                                                                    \
        for (Py_ssize_t j = 0; j < last; j++) {                                                                    \
            const LT l = L[j];                                                                                     \
            const IT i = I[j];                                                                                     \
            const LT ok = IOK[j] != 0;                                                                             \
            const LT s = (l != ign) & (LOK[j] != 0);                                                               \
            /* unshifted: label != id or the id null; shifted: label != next id and the next id not null */       \
            const LT off = SH ? ((l != I[j + SH]) & (IOK[j + SH] != 0)) : ((l != i) | (ok ^ 1));                  \
            const LT rng = (l < 0) | ((l >= bound) & bon);                                                         \
            const LT z = Z[j];                                                                                     \
            IT hit = 0;                                                                                            \
            if (NW >= 1) hit |= i == w0;                                                                           \
            if (NW >= 2) hit |= i == w1;                                                                           \
            if (NW >= 3) hit |= i == w2;                                                                           \
            if (NW >= 4) hit |= i == w3;                                                                           \
            sup[j] = (uint8_t)s;                                                                                   \
            F[j] = (uint8_t)((((s & (off | rng | z)) | (z & (i != pad) & ok & pon)) << 1) | (hit & ok & R[j]));    \
        }                                                                                                          \
    }
#define PASS1_NW(P, LT, IT, SH) \
    PASS1(P##0, LT, IT, SH, 0) PASS1(P##1, LT, IT, SH, 1) PASS1(P##2, LT, IT, SH, 2) PASS1(P##4, LT, IT, SH, 4)
PASS1_NW(p_ll_u, int64_t, int64_t, 0)
PASS1_NW(p_ll_s, int64_t, int64_t, 1)
PASS1_NW(p_li_u, int64_t, int32_t, 0)
PASS1_NW(p_li_s, int64_t, int32_t, 1)
PASS1_NW(p_il_u, int32_t, int64_t, 0)
PASS1_NW(p_il_s, int32_t, int64_t, 1)
PASS1_NW(p_ii_u, int32_t, int32_t, 0)
PASS1_NW(p_ii_s, int32_t, int32_t, 1)
#undef PASS1_NW
#undef PASS1

typedef void (*pass1_t)(const void *, const void *, const uint8_t *, const uint8_t *, const uint8_t *,
                        const uint8_t *, uint8_t *, uint8_t *, Py_ssize_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                        const int64_t *);
/* [labels narrow][ids narrow][shifted][wanted ids compared: 0, 1, 2, 4] */
static const pass1_t PASS1_OF[2][2][2][4] = {
    {{{p_ll_u0, p_ll_u1, p_ll_u2, p_ll_u4}, {p_ll_s0, p_ll_s1, p_ll_s2, p_ll_s4}},
     {{p_li_u0, p_li_u1, p_li_u2, p_li_u4}, {p_li_s0, p_li_s1, p_li_s2, p_li_s4}}},
    {{{p_il_u0, p_il_u1, p_il_u2, p_il_u4}, {p_il_s0, p_il_s1, p_il_s2, p_il_s4}},
     {{p_ii_u0, p_ii_u1, p_ii_u2, p_ii_u4}, {p_ii_s0, p_ii_s1, p_ii_s2, p_ii_s4}}},
};

/* the pass over positions [c0, c0 + m) of a segment of label shift sl and mask shift sa; -1: no memory */
static int block(job_t *J, scratch_t *S, Py_ssize_t c0, Py_ssize_t m, int64_t sl, int64_t sa) {
    const Py_ssize_t n = J->ids.len;
    Py_ssize_t j;
    /* ids at [c0, c0 + mi): with the shifted convention, the id after the block's last position too */
    const Py_ssize_t mi = (J->shifted && c0 + m < n) ? m + 1 : m;
    /* int64 ids (and labels) of a block that all fit int32 are compared as int32 (token ids, -100):
     * twice the lanes of a vector, and no int64 result to narrow to a byte (SSE2 has no 64-bit compare) */
    int ids32 = J->ids32;
    const void *I;
    if (ids32) {
        I = as32(&J->ids, c0, mi, S->ids32);
    } else if (J->ids.kind == K_I64 && J->idconsts32 && narrow64((const int64_t *)J->ids.data + c0, mi, S->ids32)) {
        I = S->ids32;
        ids32 = 1;
    } else {
        I = as64(&J->ids, c0, mi, S->ids);
    }
    int lab32 = J->lab32;
    const void *L;
    if (lab32) {
        L = as32(&J->lab, c0 + sl, m, S->lab32);
    } else if (J->lab.kind == K_I64 && J->consts32 && narrow64((const int64_t *)J->lab.data + c0 + sl, m, S->lab32)) {
        L = S->lab32;
        lab32 = 1;
    } else {
        L = as64(&J->lab, c0 + sl, m, S->lab);
    }
    const uint8_t *restrict IOK = J->ids_ok.data ? (const uint8_t *)J->ids_ok.data + c0 : S->ones;
    const uint8_t *restrict LOK = J->lab_ok.data ? (const uint8_t *)J->lab_ok.data + c0 + sl : S->ones;
    uint8_t *restrict sup = (uint8_t *)J->sup0.data + c0;
    uint8_t *restrict F = S->flag;
    /* the mask: R (1 and valid), Z (0 and valid); without a mask every position is real, none masked */
    const uint8_t *restrict R = S->ones;
    const uint8_t *restrict Z = S->zeros;
    if (J->att.data) {
        const uint8_t *restrict AOK = J->att_ok.data ? (const uint8_t *)J->att_ok.data + c0 + sa : S->ones;
        uint8_t *restrict real = (uint8_t *)J->real.data + c0;
        uint8_t *restrict z = S->z;
        mask_of(&J->att, c0 + sa, m, AOK, real, z, S->att);
        R = real;
        Z = z;
    }
    /* the constants of the rules a call leaves out made neutral */
    const int64_t ign = J->ign, bound = J->bound, pad = J->pad;
    const int64_t b_on = J->has_bound, p_on = J->has_pad && J->att.data;
    int64_t W[4] = {0, 0, 0, 0};
    const Py_ssize_t nw = J->n_wanted < 4 ? J->n_wanted : 4;
    static const int NW_AT[5] = {0, 1, 2, 3, 3}; /* the variant comparing 0, 1, 2 or 4 ids (3: the 4th repeats) */
    for (Py_ssize_t w = 0; w < 4; w++) {
        W[w] = J->wanted[w < nw ? w : 0]; /* (wanted[0] when there is none: J->wanted holds one more) */
    }
    /* the positions whose off rule reads ids[k + 1]: with the shifted convention, all but the buffers' last */
    const Py_ssize_t last = (!J->shifted || c0 + m < n) ? m : m - 1;
    PASS1_OF[lab32][ids32][J->shifted ? 1 : 0][NW_AT[nw]](L, I, LOK, IOK, R, Z, sup, F, last, ign, bound, pad,
                                                                 b_on, p_on, W);
    j = last;
    for (; j < m; j++) { /* the buffers' last position, shifted: no off rule */
        const int64_t l = value_at(&J->lab, c0 + sl + j), i = value_at(&J->ids, c0 + j);
        const uint8_t ok = IOK[j] != 0;
        const uint8_t s = (uint8_t)((l != ign) & (LOK[j] != 0));
        sup[j] = s;
        const uint8_t rng = (uint8_t)(s & ((l < 0) | ((l >= bound) & b_on)));
        const uint8_t z = Z[j];
        const uint8_t pid = (uint8_t)(z & (i != pad) & ok & p_on);
        const uint8_t hit = (uint8_t)(((i == W[0]) | (i == W[1]) | (i == W[2]) | (i == W[3])) & ok & R[j] & (nw > 0));
        F[j] = (uint8_t)(((rng | pid | (z & s)) << 1) | hit);
    }
    for (Py_ssize_t w = 4; w < J->n_wanted; w++) { /* more than four wanted ids */
        const int64_t x = J->wanted[w];
        for (j = 0; j < m; j++) {
            F[j] |= (uint8_t)((value_at(&J->ids, c0 + j) == x) & (IOK[j] != 0) & R[j]);
        }
    }
    /* pass 2: the flagged positions (bit 0: a hit, exact; bit 1: maybe one of the rare kinds, each
     * list's condition evaluated exactly); every list has room for the block's positions */
    for (int i = 0; i < N_LISTS; i++) {
        if (reserve(&J->out[i], m) < 0) {
            return -1;
        }
    }
    list_t *const out = J->out;
    for (j = 0; j < m; j += 8) {
        if (j + 8 <= m) {
            uint64_t word;
            memcpy(&word, F + j, 8);
            if (!word) {
                continue;
            }
        }
        const Py_ssize_t e8 = j + 8 <= m ? j + 8 : m;
        for (Py_ssize_t q = j; q < e8; q++) {
            const uint8_t f = F[q];
            const int64_t k = (int64_t)(c0 + q);
            if (f & 1) {
                out[L_HITS].p[out[L_HITS].n++] = k;
            }
            if (!(f & 2)) {
                continue;
            }
            const int s = sup[q] != 0;
            const int iok = IOK[q] != 0;
            const int64_t lv = value_at(&J->lab, c0 + sl + q), iv = value_at(&J->ids, c0 + q);
            int off;
            if (!J->shifted) {
                off = s && (lv != iv || !iok);
            } else {
                off = s && k + 1 < (int64_t)n && lv != value_at(&J->ids, c0 + q + 1) && IOK[q + 1];
            }
            const int z = Z[q] != 0;
            out[L_OFF].p[out[L_OFF].n] = k;
            out[L_OFF].n += off;
            out[L_PAD_ID].p[out[L_PAD_ID].n] = k;
            out[L_PAD_ID].n += z && J->has_pad && iv != J->pad && iok;
            out[L_PAD_LABEL].p[out[L_PAD_LABEL].n] = k;
            out[L_PAD_LABEL].n += z && s;
            out[L_NEG].p[out[L_NEG].n] = k;
            out[L_NEG].n += s && lv < 0;
            out[L_HIGH].p[out[L_HIGH].n] = k;
            out[L_HIGH].n += s && J->has_bound && lv >= J->bound;
        }
    }
    return 0;
}

static int run(job_t *J) {
    scratch_t *S = (scratch_t *)malloc(sizeof(scratch_t));
    if (S == NULL) {
        return -1;
    }
    memset(S->ones, 1, sizeof(S->ones));
    memset(S->zeros, 0, sizeof(S->zeros));
    for (Py_ssize_t s = 0; s < J->n_segs; s++) {
        const seg_t g = J->segs[s];
        for (int64_t c0 = g.a; c0 < g.b; c0 += BLOCK) {
            const int64_t m = g.b - c0 < BLOCK ? g.b - c0 : BLOCK;
            if (block(J, S, (Py_ssize_t)c0, (Py_ssize_t)m, g.sl, g.sa) < 0) {
                free(S);
                return -1;
            }
        }
    }
    free(S);
    return 0;
}

/* the int64 of a Python int (or an object with __index__), or -1 with ValueError set */
static int int64_of(PyObject *o, int64_t *x, const char *name) {
    PyObject *i = PyNumber_Index(o);
    if (i == NULL) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "dense_scan: %s must be an int", name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
    Py_DECREF(i);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "dense_scan: %s does not fit a 64-bit signed integer", name);
        return -1;
    }
    *x = (int64_t)v;
    return 0;
}

/* a segment's shift within [-2^62, 2^62]: a + shift never overflows */
#define SHIFT_MAX ((int64_t)1 << 62)

PyDoc_STRVAR(dense_scan_doc,
"dense_scan(ids, ids_ok, lab, lab_ok, att, att_ok, sup0, real, ign, shifted, wanted, pad, bound, segs)\n"
"--\n\n"
"The comparisons of datacheck.checks._flat._dense_scan (see there) over the flat buffers.\n\n"
"ids, lab, att: 1-D contiguous buffers of int8..int64, uint8..uint32 or bool (att None: no mask);\n"
"ids_ok, lab_ok, att_ok: bool buffers of their column's length, or None (no null element);\n"
"sup0, real: writable bool buffers of len(ids) (real None without att), written at the positions\n"
"of the segments only; ign: int; shifted: bool; wanted: tuple of ints; pad, bound: int or None;\n"
"segs: sequence of (start, end, lab_shift, att_shift) ints, ascending, apart, inside [0, len(ids)],\n"
"each shifted range inside its column. Ints must fit int64.\n\n"
"Returns six bytearrays of native int64 positions, ascending: hits, off, pad_id, pad_label, neg, high.\n"
"Raises ValueError for a buffer of another type, dimension, layout or length, or a bad segment.");

static PyObject *dense_scan(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o_ids, *o_ids_ok, *o_lab, *o_lab_ok, *o_att, *o_att_ok, *o_sup0, *o_real;
    PyObject *o_ign, *o_wanted, *o_pad, *o_bound, *o_segs;
    int shifted;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOpOOOO:dense_scan", &o_ids, &o_ids_ok, &o_lab, &o_lab_ok, &o_att, &o_att_ok,
                          &o_sup0, &o_real, &o_ign, &shifted, &o_wanted, &o_pad, &o_bound, &o_segs)) {
        return NULL;
    }
    job_t J;
    memset(&J, 0, sizeof(J));
    PyObject *result = NULL, *wanted_seq = NULL, *segs_seq = NULL;
    J.shifted = shifted;
    if (get_arg(o_ids, &J.ids, "ids", 0, 0, 0) < 0 || get_arg(o_ids_ok, &J.ids_ok, "ids_ok", 1, 1, 0) < 0 ||
        get_arg(o_lab, &J.lab, "lab", 0, 0, 0) < 0 || get_arg(o_lab_ok, &J.lab_ok, "lab_ok", 1, 1, 0) < 0 ||
        get_arg(o_att, &J.att, "att", 1, 0, 0) < 0 || get_arg(o_att_ok, &J.att_ok, "att_ok", 1, 1, 0) < 0 ||
        get_arg(o_sup0, &J.sup0, "sup0", 0, 1, 1) < 0 || get_arg(o_real, &J.real, "real", 1, 1, 1) < 0) {
        goto done;
    }
    const Py_ssize_t n = J.ids.len;
    if ((J.ids_ok.data && J.ids_ok.len != n) || (J.lab_ok.data && J.lab_ok.len != J.lab.len) ||
        (J.att_ok.data && (!J.att.data || J.att_ok.len != J.att.len))) {
        PyErr_SetString(PyExc_ValueError, "dense_scan: a validity buffer's length is not its column's");
        goto done;
    }
    if (J.sup0.len != n || (J.att.data ? (!J.real.data || J.real.len != n) : J.real.data != NULL)) {
        PyErr_SetString(PyExc_ValueError, "dense_scan: sup0 (and real, with a mask only) must hold len(ids) items");
        goto done;
    }
    if (J.sup0.view.buf == J.real.view.buf && J.real.data) {
        PyErr_SetString(PyExc_ValueError, "dense_scan: sup0 and real must be distinct buffers");
        goto done;
    }
    if (int64_of(o_ign, &J.ign, "ign") < 0) {
        goto done;
    }
    if (o_pad != Py_None) {
        if (int64_of(o_pad, &J.pad, "pad") < 0) {
            goto done;
        }
        J.has_pad = 1;
    }
    if (o_bound != Py_None) {
        if (int64_of(o_bound, &J.bound, "bound") < 0) {
            goto done;
        }
        J.has_bound = 1;
    }
    wanted_seq = PySequence_Fast(o_wanted, "dense_scan: wanted must be a sequence of ints");
    if (wanted_seq == NULL) {
        goto done;
    }
    J.n_wanted = PySequence_Fast_GET_SIZE(wanted_seq);
    J.wanted = (int64_t *)PyMem_Malloc(sizeof(int64_t) * (size_t)(J.n_wanted + 1));
    if (J.wanted == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    J.wanted[0] = 0;
    for (Py_ssize_t w = 0; w < J.n_wanted; w++) {
        if (int64_of(PySequence_Fast_GET_ITEM(wanted_seq, w), &J.wanted[w], "a wanted id") < 0) {
            goto done;
        }
    }
    J.consts32 = fits32(J.ign) && (!J.has_bound || fits32(J.bound));
    J.lab32 = narrow(J.lab.kind) && J.consts32;
    J.idconsts32 = !J.has_pad || fits32(J.pad);
    for (Py_ssize_t w = 0; w < J.n_wanted && w < 4; w++) {
        J.idconsts32 = J.idconsts32 && fits32(J.wanted[w]);
    }
    J.ids32 = narrow(J.ids.kind) && J.idconsts32;
    segs_seq = PySequence_Fast(o_segs, "dense_scan: segs must be a sequence of (start, end, lab_shift, att_shift)");
    if (segs_seq == NULL) {
        goto done;
    }
    J.n_segs = PySequence_Fast_GET_SIZE(segs_seq);
    J.segs = (seg_t *)PyMem_Malloc(sizeof(seg_t) * (size_t)(J.n_segs + 1));
    if (J.segs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t prev_end = 0;
    for (Py_ssize_t s = 0; s < J.n_segs; s++) {
        PyObject *t = PySequence_Fast_GET_ITEM(segs_seq, s);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 4) {
            PyErr_SetString(PyExc_ValueError, "dense_scan: a segment must be a tuple (start, end, lab_shift, att_shift)");
            goto done;
        }
        seg_t g;
        if (int64_of(PyTuple_GET_ITEM(t, 0), &g.a, "a segment's start") < 0 ||
            int64_of(PyTuple_GET_ITEM(t, 1), &g.b, "a segment's end") < 0 ||
            int64_of(PyTuple_GET_ITEM(t, 2), &g.sl, "a segment's label shift") < 0 ||
            int64_of(PyTuple_GET_ITEM(t, 3), &g.sa, "a segment's mask shift") < 0) {
            goto done;
        }
        if (g.a < prev_end || g.b < g.a || g.b > (int64_t)n) {
            PyErr_Format(PyExc_ValueError,
                         "dense_scan: segment %zd [%lld, %lld) is not ascending and apart inside [0, %zd)", s,
                         (long long)g.a, (long long)g.b, n);
            goto done;
        }
        if (g.sl < -SHIFT_MAX || g.sl > SHIFT_MAX || g.sa < -SHIFT_MAX || g.sa > SHIFT_MAX) {
            PyErr_Format(PyExc_ValueError, "dense_scan: segment %zd's shifts are out of range", s);
            goto done;
        }
        if (g.b > g.a) {
            if (g.a + g.sl < 0 || g.b + g.sl > (int64_t)J.lab.len) {
                PyErr_Format(PyExc_ValueError,
                             "dense_scan: segment %zd [%lld, %lld) with label shift %lld reads outside the %zd labels",
                             s, (long long)g.a, (long long)g.b, (long long)g.sl, J.lab.len);
                goto done;
            }
            if (J.att.data && (g.a + g.sa < 0 || g.b + g.sa > (int64_t)J.att.len)) {
                PyErr_Format(PyExc_ValueError,
                             "dense_scan: segment %zd [%lld, %lld) with mask shift %lld reads outside the %zd mask items",
                             s, (long long)g.a, (long long)g.b, (long long)g.sa, J.att.len);
                goto done;
            }
        }
        J.segs[s] = g;
        prev_end = g.b;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = run(&J);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_NoMemory();
        goto done;
    }
    result = PyTuple_New(N_LISTS);
    if (result == NULL) {
        goto done;
    }
    for (int i = 0; i < N_LISTS; i++) {
        PyObject *b = PyByteArray_FromStringAndSize((const char *)J.out[i].p, J.out[i].n * (Py_ssize_t)sizeof(int64_t));
        if (b == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SET_ITEM(result, i, b);
    }
done:
    release(&J.ids);
    release(&J.ids_ok);
    release(&J.lab);
    release(&J.lab_ok);
    release(&J.att);
    release(&J.att_ok);
    release(&J.sup0);
    release(&J.real);
    for (int i = 0; i < N_LISTS; i++) {
        free(J.out[i].p);
    }
    PyMem_Free(J.wanted);
    PyMem_Free(J.segs);
    Py_XDECREF(wanted_seq);
    Py_XDECREF(segs_seq);
    return result;
}

/* ------------------------------------------------------------------------------------------------
 * periodic_rows: datacheck.checks._flat.periodic_flat (its numpy code is the reference and the
 * fallback; tests/unit/checks/test_flat_native.py compares the two). Row r holds a run when, for a
 * period p in [MIN_PERIOD, MAX_PERIOD] with MIN_REPEATS * p <= the longest row, W = (MIN_REPEATS - 1) p
 * consecutive positions j of the row (j + p in the row) have vals[j] == vals[j + p] and, with ok,
 * ok[j] and ok[j + p]. Any W consecutive positions hold one multiple of W, so only the samples
 * s = kW are compared first (blocks of PERIODIC_BLOCK positions, every period while a block is in the
 * cache: 64 Ki int32 ids are 256 KiB; 1 << 15, 16 and 19 cost the same on an f100 shard, 0.8 ms against
 * 1.8 by numpy); around each true one the run is measured in its row, at most W - 1 positions each way.
 * The result is numpy's: a row is marked exactly when it holds such a run, whatever the blocks. */

#define MIN_PERIOD 1
#define MAX_PERIOD 13
#define MIN_REPEATS 32
#define PERIODIC_BLOCK ((int64_t)1 << 16)

typedef struct {
    const char *vals;
    Py_ssize_t width; /* bytes of a value: equal values are equal bytes (integers) */
    const uint8_t *ok;
    const int64_t *offsets;
    Py_ssize_t rows;
    uint8_t *out;
} periodic_t;

static inline int same_at(const periodic_t *P, int64_t j, int64_t p) {
    int eq;
    switch (P->width) {
    case 1: eq = ((const uint8_t *)P->vals)[j] == ((const uint8_t *)P->vals)[j + p]; break;
    case 2: eq = ((const uint16_t *)P->vals)[j] == ((const uint16_t *)P->vals)[j + p]; break;
    case 4: eq = ((const uint32_t *)P->vals)[j] == ((const uint32_t *)P->vals)[j + p]; break;
    default: eq = ((const uint64_t *)P->vals)[j] == ((const uint64_t *)P->vals)[j + p]; break;
    }
    return eq && (P->ok == NULL || (P->ok[j] && P->ok[j + p]));
}

static void periodic_run(const periodic_t *P) {
    const int64_t *off = P->offsets;
    const int64_t total = off[P->rows];
    int64_t longest = 0;
    for (Py_ssize_t r = 0; r < P->rows; r++) {
        longest = off[r + 1] - off[r] > longest ? off[r + 1] - off[r] : longest;
    }
    Py_ssize_t row_at[MAX_PERIOD + 1] = {0}; /* per period: the row of its last sample (samples ascend) */
    for (int64_t b0 = 0; b0 < total; b0 += PERIODIC_BLOCK) {
        const int64_t b1 = total - b0 < PERIODIC_BLOCK ? total : b0 + PERIODIC_BLOCK;
        for (int64_t p = MIN_PERIOD; p <= MAX_PERIOD; p++) {
            if (!(total > p && MIN_REPEATS * p <= longest)) {
                continue;
            }
            const int64_t win = (MIN_REPEATS - 1) * p;
            const int64_t hi = b1 < total - p ? b1 : total - p;
            Py_ssize_t r = row_at[p];
            for (int64_t s = (b0 + win - 1) / win * win; s < hi; s += win) {
                if (!same_at(P, s, p)) {
                    continue;
                }
                while (off[r + 1] <= s) { /* the row holding s (s < total: one does) */
                    r++;
                }
                const int64_t a = off[r], b = off[r + 1];
                if (s + p >= b || P->out[r]) { /* the compared position in the next row; a row found */
                    continue;
                }
                int64_t left = 0, right = 0;
                while (left < win - 1 && s - left - 1 >= a && same_at(P, s - left - 1, p)) {
                    left++;
                }
                while (right < win - 1 && s + right + 1 + p < b && same_at(P, s + right + 1, p)) {
                    right++;
                }
                if (left + 1 + right >= win) {
                    P->out[r] = 1;
                }
            }
            row_at[p] = r;
        }
    }
}

PyDoc_STRVAR(periodic_rows_doc,
"periodic_rows(vals, ok, offsets, out)\n"
"--\n\n"
"Per row, whether it holds a run of content.periodic_tokens (datacheck.checks._flat.periodic_flat):\n"
"sets out[r] to True for such rows (other items are left as they are).\n\n"
"vals: 1-D contiguous buffer of an integer type (or bool), the rows' values in order; ok: None or a\n"
"bool buffer of len(vals); offsets: int64 buffer of rows + 1 items, 0 first, non-decreasing, its\n"
"last at most len(vals); out: writable bool buffer of rows items. Raises ValueError otherwise.");

static PyObject *periodic_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o_vals, *o_ok, *o_off, *o_out;
    if (!PyArg_ParseTuple(args, "OOOO:periodic_rows", &o_vals, &o_ok, &o_off, &o_out)) {
        return NULL;
    }
    arg_t vals, ok, offs, out;
    memset(&vals, 0, sizeof(vals));
    memset(&ok, 0, sizeof(ok));
    memset(&offs, 0, sizeof(offs));
    memset(&out, 0, sizeof(out));
    PyObject *result = NULL;
    if (get_arg(o_vals, &vals, "vals", 0, 0, 0) < 0 || get_arg(o_ok, &ok, "ok", 1, 1, 0) < 0 ||
        get_arg(o_off, &offs, "offsets", 0, 0, 0) < 0 || get_arg(o_out, &out, "out", 0, 1, 1) < 0) {
        goto done;
    }
    if (offs.kind != K_I64 || offs.len < 1) {
        PyErr_SetString(PyExc_ValueError, "periodic_rows: offsets must be int64, rows + 1 items");
        goto done;
    }
    if (ok.data && ok.len != vals.len) {
        PyErr_SetString(PyExc_ValueError, "periodic_rows: ok must hold len(vals) items");
        goto done;
    }
    if (out.len != offs.len - 1) {
        PyErr_SetString(PyExc_ValueError, "periodic_rows: out must hold one item a row (len(offsets) - 1)");
        goto done;
    }
    const int64_t *o = (const int64_t *)offs.data;
    if (o[0] != 0 || o[offs.len - 1] > (int64_t)vals.len) {
        PyErr_Format(PyExc_ValueError, "periodic_rows: offsets must start at 0 and end at most at len(vals) = %zd",
                     vals.len);
        goto done;
    }
    for (Py_ssize_t r = 0; r + 1 < offs.len; r++) {
        if (o[r + 1] < o[r]) {
            PyErr_Format(PyExc_ValueError, "periodic_rows: offsets decrease at row %zd", r);
            goto done;
        }
    }
    periodic_t P = {vals.data, vals.view.itemsize, (const uint8_t *)ok.data, o, offs.len - 1, (uint8_t *)out.data};
    Py_BEGIN_ALLOW_THREADS
    periodic_run(&P);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    release(&vals);
    release(&ok);
    release(&offs);
    release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"dense_scan", dense_scan, METH_VARARGS, dense_scan_doc},
    {"periodic_rows", periodic_rows, METH_VARARGS, periodic_rows_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_scan", "datacheck's compiled scan kernels (datacheck/io/native.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__scan(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "ABI", 2) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
