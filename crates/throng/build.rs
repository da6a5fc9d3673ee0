//! Decides at build time whether the PostgreSQL variants of the API tests
//! run (`cfg(throng_pg_tests)`) or are reported by libtest as ignored, with
//! the reason: they run when `THRONG_TEST_PG_URL` is set, and always under CI
//! (`CI` set), where a missing URL then fails them instead of hiding them.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=THRONG_TEST_PG_URL");
    println!("cargo:rerun-if-env-changed=CI");
    println!("cargo::rustc-check-cfg=cfg(throng_pg_tests)");
    let url = std::env::var("THRONG_TEST_PG_URL").unwrap_or_default();
    if !url.trim().is_empty() || std::env::var_os("CI").is_some() {
        println!("cargo:rustc-cfg=throng_pg_tests");
    }
}
