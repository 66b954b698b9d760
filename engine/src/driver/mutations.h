/* mutations.h: the catalogue of injected mutations (mutations.c). */
#ifndef IPU_MUTATIONS_H
#define IPU_MUTATIONS_H

#include <jansson.h>

#include "core/core.h"
#include "lower/program.h"

typedef struct ipu_mutation {
    int id;             /* ipu_inject */
    const char *name;   /* the compile option's value */
    const char *stage;  /* exchange, place, lower, package or driver */
    const char *models; /* the bug */
} ipu_mutation;

/* The mutation of that name, NULL when none. */
const ipu_mutation *ipu_mutation_named(const char *name);
const char *ipu_mutation_name(int id);

#endif
