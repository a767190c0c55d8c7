//! Run one live benchmark case and print its headline figure (mean over the
//! repetitions) as a bare number on stdout; details go to stderr.
//!
//! Usage: livebench NAME [key=value,...] [--repeat N] [--warmup N] [--quick]
//!                  [--policy P] [--prio N] [--nice N] [--cpus LIST] [--dl R,D,P ns] [--mlock] [--json]
//! A stand-in for `schedlab run` until the CLI exists (bench/*.sh call it).

use schedlab_core::condition::{parse_cpu_list, DeadlineParams};
use schedlab_core::{MetricData, SchedCondition};
use schedlab_live::{find, hygiene, Params, RunPlan};

fn main() {
    if let Err(e) = real_main() {
        eprintln!("Error: {e}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let name = args.next().ok_or("usage: livebench NAME [key=value,...] [--repeat N] [--warmup N] [--quick] [--policy P] [--prio N] [--nice N] [--cpus LIST] [--json]")?;
    let mut params = Params::new();
    let mut plan = RunPlan { repeat: 1, warmup: 0, ..Default::default() };
    let mut cond = SchedCondition::default();
    let mut json = false;
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--repeat" => plan.repeat = val()?.parse()?,
            "--warmup" => plan.warmup = val()?.parse()?,
            "--quick" => plan.quick = true,
            "--json" => json = true,
            "--policy" => cond.policy = val()?.parse()?,
            "--prio" => cond.priority = Some(val()?.parse()?),
            "--nice" => cond.nice = Some(val()?.parse()?),
            "--cpus" => cond.cpus = Some(parse_cpu_list(&val()?)?),
            "--mlock" => cond.mlock = true,
            "--dl" => {
                // runtime,deadline,period in ns
                let v: Vec<u64> = val()?.split(',').map(str::parse).collect::<Result<_, _>>()?;
                let [runtime_ns, deadline_ns, period_ns] = v[..] else {
                    return Err("--dl RUNTIME,DEADLINE,PERIOD (ns)".into());
                };
                cond.deadline = Some(DeadlineParams { runtime_ns, deadline_ns, period_ns });
            }
            p if p.contains('=') => params = Params::parse(p)?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    plan.condition = cond;
    hygiene::install_signal_handlers()?;
    let bench = find(&name)?;
    for case in bench.cases(&params, &plan)? {
        let r = bench.run(&case, &plan, &|_| {})?;
        if json {
            println!("{}", serde_json::to_string_pretty(&r)?);
            continue;
        }
        for m in &r.metrics {
            let s = m.summary();
            match &m.data {
                MetricData::Histogram { histogram: h, .. } => eprintln!(
                    "{} {}: n={} p50={:?} p99={:?} max={:?} ns",
                    r.key(),
                    m.name,
                    h.count(),
                    h.quantile(0.5),
                    h.quantile(0.99),
                    h.max()
                ),
                _ => eprintln!("{} {}: {:?}", r.key(), m.name, s.map(|s| s.mean)),
            }
        }
        for w in &r.warnings {
            eprintln!("warning: {w}");
        }
        let head = r.metrics.iter().find(|m| m.headline).and_then(|m| m.summary()).ok_or("no headline metric")?;
        println!("{:.3}", head.mean);
    }
    Ok(())
}
