#include "../check_main.h"
#include "test_qdl_unit.h"

CHECK_MAIN("qdl", tcase_policy, tcase_part_size, tcase_pending, tcase_results, tcase_names,
           tcase_alloc)
