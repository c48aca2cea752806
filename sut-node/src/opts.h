/* The node's options (sut_opts_t in types.h): defaults and the strings they own. */
#ifndef SUT_OPTS_H
#define SUT_OPTS_H

#include "types.h"

void sut__opts_defaults(sut_opts_t *o);
/* Keeps |s| (malloc'ed) until sut__opts_free; returns it, or NULL (and frees it) when full. */
char *sut__opts_own(sut_opts_t *o, char *s);
void sut__opts_free(sut_opts_t *o);

#endif
