//! fileio on tiny cases through the public API: figures present and
//! consistent with the call counts, the condition on the measuring thread,
//! bad input refused before anything runs, and no test file left behind on
//! success, refusal or interrupt. The stop flag is global, so each test
//! takes `LOCK`. No timing assertions.

mod common;
use common::{lock, plan};
use schedlab_core::{BenchResult, Condition, MetricData, SchedCondition};
use schedlab_live::{find, hygiene, LiveError, Params, RunPlan};
use std::path::{Path, PathBuf};

fn run(params: &str, plan: &RunPlan) -> Result<Vec<BenchResult>, LiveError> {
    common::run("fileio", params, plan)
}

/// A test that cannot run here fails, saying why: it never passes unrun.
fn cannot_run(why: &str) -> ! {
    panic!("this test cannot run here: {why}");
}

/// A fresh directory of its own under the temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("schedlab-fileio-test-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir(&p).unwrap();
        Scratch(p)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }

    fn entries(&self) -> Vec<String> {
        std::fs::read_dir(&self.0).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn samples<'a>(r: &'a BenchResult, metric: &str) -> &'a [f64] {
    match &r.metric(metric).unwrap_or_else(|| panic!("no metric {metric}")).data {
        MetricData::Samples { values } => values,
        other => panic!("{metric} is not samples: {other:?}"),
    }
}

/// Calls per measured repetition of a latency histogram.
fn per_rep_counts(r: &BenchResult, metric: &str) -> Vec<u64> {
    match &r.metric(metric).unwrap_or_else(|| panic!("no metric {metric}")).data {
        MetricData::Histogram { histogram, repetitions } => {
            assert_eq!(repetitions.iter().map(|h| h.count()).sum::<u64>(), histogram.count(), "{metric}: parts add up");
            repetitions.iter().map(|h| h.count()).collect()
        }
        other => panic!("{metric} is not a histogram: {other:?}"),
    }
}

fn statvfs_free(dir: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: plain old data, zero is valid; c is NUL-terminated.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut s) }, 0);
    s.f_bavail as u64 * s.f_frsize as u64
}

fn fs_magic(dir: &str) -> u64 {
    let c = std::ffi::CString::new(dir).unwrap();
    // SAFETY: plain old data, zero is valid; c is NUL-terminated.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return 0;
    }
    s.f_type as u64
}

const TMPFS_MAGIC: u64 = 0x0102_1994;

#[test]
fn page_cache_case_reports_rates_latencies_and_cache_share_and_leaves_no_file() {
    let _g = lock();
    let dir = Scratch::new("page");
    // 1 MiB in 4 KiB calls: 256 writes and 256 reads per repetition.
    let r = run(&format!("size=1024,block=4096,dir={}", dir.path()), &plan(2, 1)).unwrap();
    assert_eq!(r.len(), 1);
    let r = &r[0];
    for m in ["write_kb_per_s", "read_kb_per_s"] {
        let v = samples(r, m);
        assert_eq!(v.len(), 2, "{m}: one value per measured repetition");
        assert!(v.iter().all(|x| x.is_finite() && *x > 0.0), "{m}: {v:?}");
        assert!(r.metric(m).unwrap().headline);
    }
    assert_eq!(per_rep_counts(r, "write_call_latency"), vec![256, 256]);
    assert_eq!(per_rep_counts(r, "read_call_latency"), vec![256, 256]);
    let cached = samples(r, "cached_before_read");
    assert!(cached.iter().all(|c| *c > 50.0), "a file just written through the page cache stays cached: {cached:?}");
    assert_eq!(r.params["dir"], serde_json::json!(dir.path()));
    assert_eq!(r.params["size"], serde_json::json!(1024));
    let notes = r.warnings.join(" | ");
    assert!(notes.contains(&format!("file in {} on ", dir.path())), "{notes}");
    assert!(notes.contains("likely served from the page cache"), "{notes}");
    assert!(notes.contains("with fsync=no the write figure ends"), "{notes}");
    assert_eq!(dir.entries(), Vec::<String>::new(), "test files left behind");
}

#[test]
fn a_short_last_call_and_fsync_are_handled() {
    let _g = lock();
    let dir = Scratch::new("short");
    // A 1 KiB file in 1000-byte calls: 2 calls (1000 + 24 bytes).
    let r = run(&format!("size=1,block=1000,fsync=yes,dir={}", dir.path()), &plan(1, 0)).unwrap();
    assert_eq!(per_rep_counts(&r[0], "write_call_latency"), vec![2]);
    assert_eq!(per_rep_counts(&r[0], "read_call_latency"), vec![2]);
    assert!(r[0].warnings.iter().any(|w| w.contains("fsync'ed before the write clock stops")), "{:?}", r[0].warnings);
    assert_eq!(dir.entries(), Vec::<String>::new());
}

#[test]
fn the_default_dir_is_the_system_temp_dir() {
    let _g = lock();
    let r = run("size=64,block=4096", &plan(1, 0)).unwrap();
    assert_eq!(r[0].params["dir"], serde_json::json!("temp"));
    let tmp = std::env::temp_dir();
    assert!(r[0].warnings[0].starts_with(&format!("file in {} on ", tmp.display())), "{:?}", r[0].warnings);
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("schedlab-fileio-{}-", std::process::id())))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "test files left in the temp dir");
}

#[test]
fn the_condition_applies_to_the_measuring_thread_only() {
    let _g = lock();
    let dir = Scratch::new("cond");
    let cond = SchedCondition { nice: Some(7), cpus: Some(vec![0]), ..Default::default() };
    let p = plan(1, 0).with_condition(cond);
    // SAFETY: getpriority of the calling thread (who = 0) cannot fault.
    let before = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    let r = run(&format!("size=64,block=4096,dir={}", dir.path()), &p).unwrap();
    match &r[0].condition {
        Condition::Live { applied: Some(a), .. } => {
            assert_eq!(a.nice, Some(7));
            assert_eq!(a.cpus, Some(vec![0]));
        }
        other => panic!("no applied condition: {other:?}"),
    }
    // SAFETY: as above.
    assert_eq!(unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }, before, "the caller's thread is untouched");
}

#[test]
fn direct_io_bypasses_the_page_cache_on_a_disk_filesystem() {
    let _g = lock();
    if matches!(fs_magic(std::env::temp_dir().to_str().unwrap()), TMPFS_MAGIC | 0x8584_58f6) {
        cannot_run("the temp dir is on tmpfs/ramfs, which has no O_DIRECT; set TMPDIR to a disk filesystem");
    }
    let dir = Scratch::new("direct");
    let r = match run(&format!("size=256,block=4096,cache=direct,dir={}", dir.path()), &plan(1, 0)) {
        Err(LiveError::BadParam { key, expected, .. }) if key == "cache" => {
            cannot_run(&format!(
                "the temp dir's filesystem refuses O_DIRECT ({expected}); set TMPDIR to one that takes it"
            ));
        }
        other => other.unwrap(),
    };
    assert_eq!(per_rep_counts(&r[0], "write_call_latency"), vec![64]);
    let cached = samples(&r[0], "cached_before_read");
    assert!(cached[0] < 50.0, "O_DIRECT writes leave the file out of the page cache: {cached:?}");
    assert!(r[0].warnings.iter().any(|w| w.contains("cache=direct: O_DIRECT with")), "{:?}", r[0].warnings);
    assert_eq!(dir.entries(), Vec::<String>::new());
    // Unaligned calls are refused before anything runs, naming the alignment.
    let e = run(&format!("size=256,block=100,cache=direct,dir={}", dir.path()), &plan(1, 0)).unwrap_err();
    assert!(e.to_string().contains("a multiple of") && e.to_string().contains("with cache=direct"), "{e}");
}

fn refused(params: &str) -> String {
    let b = find("fileio").unwrap();
    let e = b.cases(&Params::parse(params).unwrap(), &plan(1, 0)).unwrap_err();
    // run() checks the same things itself.
    let e2 = b.run(&Params::parse(params).unwrap(), &plan(1, 0), &|_| {}).unwrap_err();
    assert_eq!(e.to_string(), e2.to_string());
    e.to_string()
}

#[test]
fn bad_input_is_refused_before_anything_runs() {
    let _g = lock();
    let dir = Scratch::new("bad");
    let missing = format!("{}/no/such/dir", dir.path());
    let e = refused(&format!("dir={missing}"));
    assert!(e.contains("parameter dir") && e.contains(&format!("{missing} does not exist")), "{e}");

    let file = dir.0.join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let e = refused(&format!("dir={}", file.display()));
    assert!(e.contains("is not one"), "{e}");
    std::fs::remove_file(&file).unwrap();

    // Root may write anywhere that is writable, so use filesystems where nobody can create files.
    for ro in ["/proc/self", "/sys"] {
        let e = refused(&format!("dir={ro},size=4"));
        assert!(e.contains("a writable directory: creating a file in") && e.contains(ro), "{ro}: {e}");
    }

    let e = refused("block=0");
    assert!(e.contains("parameter block") && e.contains("a size from 1B to 64MiB"), "{e}");
    let e = refused(&format!("size=4,block=8192,dir={}", dir.path()));
    assert!(e.contains("at most the file size (4096 bytes"), "{e}");

    let free_kib = statvfs_free(&dir.0) / 1024;
    if free_kib < 1 << 32 {
        let e = refused(&format!("size={},dir={}", free_kib + 1, dir.path()));
        assert!(
            e.contains("parameter size") && e.contains("headroom is more than the") && e.contains("free in"),
            "{e}"
        );
    } else {
        eprintln!("note: the too-large size= case is not checked: more than 4 TiB free");
    }

    if fs_magic("/dev/shm") == TMPFS_MAGIC {
        let e = refused("cache=direct,dir=/dev/shm,size=64,block=4096");
        assert!(e.contains("parameter cache") && e.contains("tmpfs") && e.contains("dir="), "{e}");
    } else {
        eprintln!("note: the O_DIRECT-on-tmpfs case is not checked: /dev/shm is not tmpfs here");
    }
    assert_eq!(dir.entries(), Vec::<String>::new(), "probe files left behind");
}

#[test]
fn an_interrupted_run_removes_its_file() {
    let _g = lock();
    let dir = Scratch::new("stop");
    // 512 MiB in 4 KiB calls: long enough for a progress report (10 Hz) to arrive mid-way.
    let size_kib = 512 * 1024;
    if statvfs_free(&dir.0) < (size_kib + 256 * 1024) * 1024 {
        cannot_run("less than 768 MiB free in the temp dir; set TMPDIR to a roomier filesystem");
    }
    let b = find("fileio").unwrap();
    let case = Params::parse(&format!("size={size_kib},block=4096,dir={}", dir.path())).unwrap();
    let saw_file = std::cell::Cell::new(false);
    let e = b
        .run(&case, &plan(3, 0), &|f| {
            if f > 0.0 && !hygiene::stop_requested() {
                saw_file.set(dir.entries().iter().any(|n| n.starts_with("schedlab-fileio-")));
                hygiene::request_stop();
            }
        })
        .unwrap_err();
    assert!(matches!(e, LiveError::Interrupted), "{e}");
    assert!(saw_file.get(), "the test file should have existed while measuring");
    assert_eq!(dir.entries(), Vec::<String>::new(), "test file left behind after the stop");
    hygiene::clear_stop();
}
