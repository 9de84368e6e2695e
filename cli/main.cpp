// The attograd program (placeholder until the subcommands land).
#include <cstdio>

int main() {
  std::puts("attograd: the command line is being built; see README.md");
  return 0;
}
