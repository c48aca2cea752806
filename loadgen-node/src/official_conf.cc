// official_conf.cc: --mlperf-conf under --loadgen official, compared with the mlperf.conf
// compiled into the official LoadGen (see official_conf.h).
//
// Key-equal, not byte-equal: FromConfig keeps only key/value pairs, so a copy re-indented, with
// comments dropped or lines reordered runs exactly the same settings and is accepted; any key
// added, missing or with another value token is refused. Values are compared as the tokens
// FromConfig stores (strings), so "1024" and "1024.0" count as different: strict, and the message
// shows both.
#include "official_conf.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

// Defined by the official LoadGen (its mlperf_conf.h, generated from loadgen/mlperf.conf at its
// configure time and compiled into test_settings_internal.cc): the text FromConfig reads for
// conf_type 0. loadgen-node/CMakeLists.txt checks at configure time that the library has it.
extern const char *mlperf_conf;

#ifndef LG_OFFICIAL_LIBRARY
#    define LG_OFFICIAL_LIBRARY "the official LoadGen"
#endif

namespace
{

struct Conf {
    std::map<std::string, std::string> kv;
    int bad_line = 0; // first line FromConfig would reject (1-based), 0 if none
};

// FromConfig's number test: the whole token an integer (strtoul, any base) or a double.
bool is_number(const std::string &s)
{
    const char *start = s.c_str();
    char *stop;
    (void)std::strtoul(start, &stop, 0);
    if (start + s.size() == stop)
        return true;
    (void)std::strtod(start, &stop);
    return start + s.size() == stop;
}

// As TestSettings::FromConfig (test_settings_internal.cc) tokenises a conf: whitespace-separated
// `key = value`, a lone "#" before the value ends the line, further number tokens after the
// value replace it, and a later line replaces an earlier value of the same key.
void parse(std::istream &in, Conf *c)
{
    std::string line;
    int nr = 0;
    while (std::getline(in, line)) {
        nr++;
        std::istringstream iss(line);
        std::string s, k;
        int looking_for = 0; // 0 key, 1 '=', 2 value
        while (iss >> s) {
            if (s == "#" && looking_for != 2)
                break;
            if (looking_for == 2) {
                if (!is_number(s)) {
                    c->bad_line = c->bad_line ? c->bad_line : nr;
                    break;
                }
                c->kv[k] = s;
                continue;
            }
            if (looking_for == 1 && s != "=") {
                c->bad_line = c->bad_line ? c->bad_line : nr;
                break;
            }
            if (looking_for == 0)
                k = s;
            looking_for++;
        }
    }
}

// The first difference between |mine| and the compiled-in |ref| (in key order), and how many.
int first_difference(const Conf &mine, const Conf &ref, std::string *what)
{
    int n = 0;
    auto a = mine.kv.begin();
    auto b = ref.kv.begin();
    while (a != mine.kv.end() || b != ref.kv.end()) {
        std::string d;
        if (b == ref.kv.end() || (a != mine.kv.end() && a->first < b->first)) {
            d = "key " + a->first + " = " + a->second + " is not in the compiled-in copy";
            ++a;
        } else if (a == mine.kv.end() || b->first < a->first) {
            d = "key " + b->first + " (= " + b->second + " in the compiled-in copy) is missing";
            ++b;
        } else {
            if (a->second != b->second)
                d = "key " + a->first + " is " + a->second + " there, " + b->second +
                    " in the compiled-in copy";
            ++a;
            ++b;
        }
        if (!d.empty() && n++ == 0)
            *what = d;
    }
    return n;
}

} // namespace

int lg_official_check_mlperf_conf(const char *path, cmn_errbuf_t *eb)
{
    errno = 0;
    std::ifstream f(path);
    if (!f.is_open()) {
        int e = errno ? errno : ENOENT;
        return cmn_errf(eb, -e, "--mlperf-conf %s: cannot open it: %s", path, std::strerror(e));
    }
    Conf mine, ref;
    parse(f, &mine);
    std::istringstream compiled(mlperf_conf);
    parse(compiled, &ref);
    if (mine.bad_line)
        return cmn_errf(eb, CMN_ECONFIG,
                        "--mlperf-conf %s: line %d is not `key = number` as the official "
                        "LoadGen reads a conf, so it differs from the mlperf.conf compiled into "
                        "%s; --loadgen official reads only that copy (omit --mlperf-conf or "
                        "give it unchanged)",
                        path, mine.bad_line, LG_OFFICIAL_LIBRARY);
    std::string what;
    int n = first_difference(mine, ref, &what);
    if (n == 0)
        return 0;
    return cmn_errf(eb, CMN_ECONFIG,
                    "--mlperf-conf %s differs from the mlperf.conf compiled into %s (%d key%s; "
                    "first: %s); --loadgen official reads only that copy, so the builtin and "
                    "official front ends would run different settings (omit --mlperf-conf or "
                    "give it unchanged)",
                    path, LG_OFFICIAL_LIBRARY, n, n == 1 ? "" : "s", what.c_str());
}
