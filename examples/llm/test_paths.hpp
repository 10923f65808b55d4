// Where the LLM example's tests find their files: SHRINK_LLM_TESTDATA, the committed testdata folder, and
// SHRINK_LLM_DATA_DIR, the model and texts of scripts/fetch-llm-data.sh (compile definitions of CMakeLists.txt).
#pragma once

#include <string>

namespace llm::test_paths {

#ifdef SHRINK_LLM_TESTDATA
inline const std::string kTestdata = SHRINK_LLM_TESTDATA;
#endif
#ifdef SHRINK_LLM_DATA_DIR
inline const std::string kDataDir = SHRINK_LLM_DATA_DIR;
#endif

}  // namespace llm::test_paths
