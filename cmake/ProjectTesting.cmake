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
