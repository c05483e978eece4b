/* gradcheck families: tests/grad_<name>.c */
GC_FAMILY(elementwise)
GC_FAMILY(reduce)
GC_FAMILY(view)
GC_FAMILY(index)
GC_FAMILY(linalg)
GC_FAMILY(conv)
GC_FAMILY(attention)
