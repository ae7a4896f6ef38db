// Transparent huge pages for a simulating process's heap.
//
// A big simulated world (thousands of ranks, a k=16 fabric's deep lossless
// queues) reads ports, NICs, QPs and collective state scattered over
// hundreds of MiB a few nanoseconds of virtual time apart; with 4 KiB pages
// nearly every such read also misses the TLB. Debian, like most
// distributions, sets THP to `madvise`: only memory a program advises gets
// 2 MiB pages. glibc's malloc advises its heap and its mappings when the
// tunable glibc.malloc.hugetlb=1 is set, but it reads tunables only at
// process start, so a process that wants them re-executes itself once with
// the tunable added (docs/PERFORMANCE.md, "Huge pages", has the figures).
//
// Nothing else changes: the program, its arguments, its pid (mpirun's
// processes stay its own) and, once the new image has started, its
// environment (the caller's GLIBC_TUNABLES is put back, so children do not
// inherit the setting).
#pragma once

namespace fathom {

// Called first thing in main. Re-executes /proc/self/exe with argv when all
// hold: the kernel's THP mode is `madvise`; GLIBC_TUNABLES does not already
// set glibc.malloc.hugetlb; FATHOM_HUGE_PAGES is not "0" (the opt-out); the
// process is not under AddressSanitizer or valgrind (their allocators replace
// malloc's). In the re-executed image it restores the environment and
// returns. Returns without effect when exec fails (the run goes on with
// 4 KiB pages). Not thread-safe: call it before any thread starts.
void PreferHugePages(char** argv);

// Whether this image is the one PreferHugePages re-executed (its heap is
// advised for 2 MiB pages): what `fathom -v` reports.
bool HugePagesAdvised();

// Two of PreferHugePages' conditions: this build is AddressSanitizer's (its
// allocator replaces malloc's), and the kernel's THP mode is `madvise`.
bool BuiltWithAddressSanitizer();
bool ThpModeIsMadvise();

}  // namespace fathom
