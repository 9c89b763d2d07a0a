/* datacheck._scan: compiled kernel (built at install by setuptools; see datacheck/io/native.py).
 * Skeleton: the module exists so that the build and the loader are exercised; its kernels are
 * added with their numpy references and property tests. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyMethodDef methods[] = {
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_scan", "datacheck's compiled scan kernels (datacheck/io/native.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__scan(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "ABI", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
