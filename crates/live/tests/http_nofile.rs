//! The `http` benchmark raises the soft open-file limit for a case that
//! needs it and puts it back afterwards. A test binary of its own: it
//! lowers this process's limit, which would disturb tests running beside it.

mod common;
use common::{lock, plan};

fn nofile() -> (u64, u64) {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: r is a valid, writable rlimit.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
    (r.rlim_cur, r.rlim_max)
}

#[test]
fn the_open_file_limit_is_raised_for_the_case_and_put_back() {
    let _g = lock();
    let (soft, hard) = nofile();
    // 150 connections without keep-alive: up to 300 client sockets, beyond a soft limit of 128.
    let low = 128;
    assert!(hard >= 300 + 64, "the hard open-file limit ({hard}) is too low for this test: raise it (ulimit -Hn)");
    let r = libc::rlimit { rlim_cur: low, rlim_max: hard };
    // SAFETY: a valid rlimit (lowering needs no privilege).
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) }, 0);
    let out = common::run("http", "requests=600,concurrency=150,server=event,workers=1", &plan(1, 0));
    let after = nofile();
    let r = libc::rlimit { rlim_cur: soft, rlim_max: hard };
    // SAFETY: as above; back to what the test started with.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
    let res = out.expect("the case runs with the limit raised").remove(0);
    assert!(res.warnings.iter().all(|w| !w.contains("failed")), "{:?}", res.warnings);
    assert_eq!(after, (low, hard), "the soft limit was not put back");
}
