// The checks the driver's test programs share: each CHECK records a pass or
// a failure (printed with its place) and the program goes on, so one run
// reports every broken expectation; main() returns nonzero if any failed.
#pragma once

#include <cstdio>
#include <cstring>
#include <string>

#include "../mydev_runtime.h"

inline int g_passed = 0;
inline int g_failed = 0;

inline void record(bool ok, const char* file, int line,
                   const std::string& what) {
  if (ok) {
    ++g_passed;
  } else {
    ++g_failed;
    std::fprintf(stderr, "FAIL %s:%d: %s\n", file, line, what.c_str());
  }
}

#define CHECK(cond) record(bool(cond), __FILE__, __LINE__, #cond)

#define CHECK_STATUS(expr, expected)                                     \
  do {                                                                   \
    const mydevError_t status_ = (expr);                                 \
    record(status_ == (expected), __FILE__, __LINE__,                    \
           std::string(#expr) + " returned " + std::to_string(status_) + \
               " (" + mydevGetLastErrorMessage() + "), expected " +      \
               #expected);                                               \
  } while (0)

#define CHECK_OK(expr) CHECK_STATUS(expr, mydevSuccess)

inline bool last_message_has(const char* text) {
  return std::strstr(mydevGetLastErrorMessage(), text) != nullptr;
}
