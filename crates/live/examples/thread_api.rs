//! Measure what one thread create+join costs with raw pthreads vs
//! std::thread, interleaved, to justify the threads benchmark's choice.
//! Usage: thread_api [THREADS_PER_ROUND (20000)] [ROUNDS (5)]

use std::time::Instant;

extern "C" fn empty(_: *mut libc::c_void) -> *mut libc::c_void {
    std::ptr::null_mut()
}

fn raw(n: usize) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        let mut th: libc::pthread_t = 0;
        // SAFETY: th is writable; default attributes; `empty` touches nothing.
        assert_eq!(unsafe { libc::pthread_create(&mut th, std::ptr::null(), empty, std::ptr::null_mut()) }, 0);
        // SAFETY: th was created above and is joined once.
        assert_eq!(unsafe { libc::pthread_join(th, std::ptr::null_mut()) }, 0);
    }
    t.elapsed().as_secs_f64() * 1e9 / n as f64
}

fn std_thread(n: usize) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        std::thread::spawn(|| {}).join().expect("empty thread cannot panic");
    }
    t.elapsed().as_secs_f64() * 1e9 / n as f64
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    raw(1000);
    std_thread(1000);
    let mut ratios = Vec::new();
    for r in 0..rounds {
        let (a, b) = if r % 2 == 0 {
            (raw(n), std_thread(n))
        } else {
            let b = std_thread(n);
            (raw(n), b)
        };
        println!("round {r}: pthread {a:.0} ns  std::thread {b:.0} ns  std/pthread {:.3}", b / a);
        ratios.push(b / a);
    }
    ratios.sort_by(f64::total_cmp);
    println!("median std/pthread cost ratio: {:.3}", ratios[ratios.len() / 2]);
}
