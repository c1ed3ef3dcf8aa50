// Placeholder until seccomp-run lands.
int main() { return 1; }
