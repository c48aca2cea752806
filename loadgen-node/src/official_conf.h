// official_conf.h: --mlperf-conf under --loadgen official. The official LoadGen never reads a
// mlperf.conf from a path: its build embeds loadgen/mlperf.conf (the global mlperf_conf of its
// mlperf_conf.h), and TestSettings::FromConfig reads that copy. A different file given to
// loadgen-node would silently split the two front ends (the builtin scheduler reads the file),
// so it is refused. C++ only (official.cc).
#ifndef LG_OFFICIAL_CONF_H
#define LG_OFFICIAL_CONF_H

/* The cmn headers are C without C++ guards. */
extern "C" {
#include "cmn/err.h"
}

// 0 when the file at |path| holds the same settings as the mlperf.conf compiled into the
// official LoadGen: the same keys with the same value tokens, read as FromConfig reads a conf
// (comments, blank lines, spacing and order do not count). Otherwise CMN_ECONFIG (or the error
// of opening it), with |eb| naming the file, the LoadGen library and the first differing key.
int lg_official_check_mlperf_conf(const char *path, cmn_errbuf_t *eb);

#endif
