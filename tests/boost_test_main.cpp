// The one main() of every test program: Boost.Test's, compiled once per build and linked into each test
// (CMakeLists.txt), so that the test files include <boost/test/unit_test.hpp> through the tests' shared
// precompiled header instead of compiling Boost.Test's runner each.
#define BOOST_TEST_MODULE attograd
#include <boost/test/unit_test.hpp>
