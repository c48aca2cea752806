# check_suite(<exe> <source>... LIBS <lib>...): a Check suite's executable, linked with Check and
# built with the project's warnings (its cases are registered with check_suite_tests below).
function(check_suite exe)
    cmake_parse_arguments(CS "" "" "LIBS" ${ARGN})
    add_executable(${exe} ${CS_UNPARSED_ARGUMENTS})
    target_link_libraries(${exe} PRIVATE ${CS_LIBS} PkgConfig::CHECK)
    project_warnings(${exe})
endfunction()

# Every Check TCase becomes its own CTest test (selected with CK_RUN_CASE), so ctest lists,
# labels and times each case, and a failure names the case. A case the suite skips (its TCase
# maker returns NULL, see tests/unit/check_main.h) exits 77 and shows as skipped.
#   check_suite_tests(<exe> MODULE <label> KIND <label>... CASES <case>...)
function(check_suite_tests exe)
    cmake_parse_arguments(CS "" "MODULE;TIMEOUT" "KIND;CASES" ${ARGN})
    if(NOT CS_TIMEOUT)
        set(CS_TIMEOUT 60)
    endif()
    foreach(tcase ${CS_CASES})
        add_test(NAME ${CS_MODULE}.${tcase} COMMAND ${exe})
        set_tests_properties(${CS_MODULE}.${tcase} PROPERTIES
            ENVIRONMENT "CK_RUN_CASE=${tcase};CK_DEFAULT_TIMEOUT=${CS_TIMEOUT}"
            LABELS "${CS_MODULE};${CS_KIND}"
            SKIP_RETURN_CODE 77
            TIMEOUT ${CS_TIMEOUT})
    endforeach()
endfunction()

# The same cases again over ucx://, once per UCX transport this machine has: TCP, and shared
# memory (UCX 1.13 puts it on a client-server endpoint only with UCX_MM_ERROR_HANDLING=y; TCP
# stays for the wire-up). The tests' clients and nodes speak UCX (NSUT_TEST_TRANSPORT=ucx); a
# case exits 77 (skipped) only where UCX reports no usable transport. Tests are named
# <module>.ucx_<tcp|shm>.<case> and labelled ucx besides their module and kind. TCP_CASES run
# over UCX's TCP transport only (a node killed while others live: UCX's shared-memory queue cannot
# survive it, tests/README.md).
#   ucx_suite_tests(<exe> MODULE <label> KIND <label>... TIMEOUT <s> CASES <case>...
#                   [TCP_CASES <case>...])
function(ucx_suite_tests exe)
    cmake_parse_arguments(US "" "MODULE;TIMEOUT" "KIND;CASES;TCP_CASES" ${ARGN})
    foreach(tl tcp shm)
        if(tl STREQUAL "tcp")
            set(env "UCX_TLS=tcp")
            set(cases ${US_CASES} ${US_TCP_CASES})
        else()
            set(env "UCX_TLS=sm,tcp;UCX_MM_ERROR_HANDLING=y")
            set(cases ${US_CASES})
        endif()
        foreach(tcase ${cases})
            add_test(NAME ${US_MODULE}.ucx_${tl}.${tcase} COMMAND ${exe})
            set_tests_properties(${US_MODULE}.ucx_${tl}.${tcase} PROPERTIES
                ENVIRONMENT
                    "CK_RUN_CASE=${tcase};CK_DEFAULT_TIMEOUT=${US_TIMEOUT};NSUT_TEST_TRANSPORT=ucx;${env}"
                LABELS "${US_MODULE};${US_KIND};ucx"
                SKIP_RETURN_CODE 77
                TIMEOUT ${US_TIMEOUT})
        endforeach()
    endforeach()
endfunction()
