import Glibc

/// Hands the C heap's free pages back to the kernel (glibc's `malloc_trim(0)`, which
/// `<malloc.h>` declares and the Glibc module does not import).
///
/// Loading 10,000 sources parses their files on every core: each parsing thread allocates in
/// a malloc arena of its own, and what the load freed there stays in the daemon's RSS (glibc
/// trims only the top of the main heap by itself). The daemon calls this once a generation
/// is running and then every minute: free memory leaves the RSS, live memory is untouched.
enum FreeMemory {
    @_silgen_name("malloc_trim")
    private static func malloc_trim(_ pad: Int) -> Int32

    static func release() {
        _ = malloc_trim(0)
    }
}
