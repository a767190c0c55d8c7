//! `make`: E4's `time make -j N` (the live `build` benchmark's names): a
//! DAG of compile jobs and a final link, at most `jobs` running at once.
//!
//! Model: a job holds one of `jobs` slots (make's job tokens) from before
//! it reads its sources until its object is written: an I/O wait (`read`),
//! its CPU work (`work`, spread evenly over +-50 % by job number), another
//! I/O wait (`write`). I/O waits overlap freely (no disk queue).
//! A job starts once the jobs it depends on (`dag`) have finished; the link
//! waits for every compile job. While a job waits on I/O its slot is held and
//! its CPU may idle, which is why E4's best -j on 2 CPUs was 3, not 2. Make's
//! own work and the kernel's (E4's "sys" column) are not modelled.

use super::{empty, task, MAYBE_NO_CPU, STEP};
use crate::program::{Class, Dur, Step};
use crate::spec::Spec;
use crate::workload::{Report, WorkloadDef};
use crate::SimError;
use schedlab_core::param::{Kind, Param, Resolved};

pub(super) const PARAMS: &[Param] = &[
    Param::new("jobs", Kind::Count { min: 1, max: 1024 }, "1", "jobs at once (make -j)"),
    Param::new("units", Kind::Count { min: 1, max: 100_000 }, "60", "compile jobs, numbered from 0"),
    Param::new("work", STEP, "100ms", "mean CPU per compile job (spread over +-50% by job number)"),
    Param::new("read", MAYBE_NO_CPU, "15ms", "I/O wait before a job's CPU work (sources, headers)"),
    Param::new("write", MAYBE_NO_CPU, "5ms", "I/O wait after it (the object file)"),
    Param::new("link", MAYBE_NO_CPU, "500ms", "CPU of the final link, after every compile job"),
    Param::new(
        "dag",
        Kind::Text,
        "none",
        "dependencies between compile jobs: A>B (job A before job B) separated by ';', e.g. 0>2;1>2; none: independent jobs",
    ),
];

/// Parse `dag` into edges (a, b), checking the job numbers and refusing a cycle.
fn edges(spec: &Spec, text: &str, units: usize) -> Result<Vec<(usize, usize)>, SimError> {
    if text == "none" {
        return Ok(Vec::new());
    }
    let bad = |why: String| spec.bad_value_why("dag", text, &why);
    let mut out = Vec::new();
    for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = part
            .split_once('>')
            .and_then(|(a, b)| Some((a.trim().parse::<usize>().ok()?, b.trim().parse::<usize>().ok()?)))
            .ok_or_else(|| bad(format!("'{part}' is not A>B with job numbers A and B (e.g. 0>2)")))?;
        if let Some(j) = [a, b].into_iter().find(|&j| j >= units) {
            return Err(bad(format!("job {j} does not exist: units={units} numbers the jobs 0 to {}", units - 1)));
        }
        if a == b {
            return Err(bad(format!("'{part}' makes job {a} wait for itself: remove it")));
        }
        if !out.contains(&(a, b)) {
            out.push((a, b));
        }
    }
    if let Some(cycle) = find_cycle(&out, units) {
        let path: Vec<String> = cycle.iter().map(usize::to_string).collect();
        return Err(bad(format!(
            "the dependencies form a cycle ({}), so none of its jobs could ever start: remove one of its edges",
            path.join(">")
        )));
    }
    Ok(out)
}

/// A cycle of the graph as its jobs, first repeated at the end; None if it is a DAG.
fn find_cycle(edges: &[(usize, usize)], n: usize) -> Option<Vec<usize>> {
    let mut succ = vec![Vec::new(); n];
    for &(a, b) in edges {
        succ[a].push(b);
    }
    // Iterative depth-first search: 0 unseen, 1 on the path, 2 done.
    let mut state = vec![0u8; n];
    for root in 0..n {
        if state[root] != 0 {
            continue;
        }
        let mut path: Vec<(usize, usize)> = vec![(root, 0)];
        state[root] = 1;
        while let Some(&mut (node, ref mut next)) = path.last_mut() {
            if let Some(&s) = succ[node].get(*next) {
                *next += 1;
                match state[s] {
                    0 => {
                        state[s] = 1;
                        path.push((s, 0));
                    }
                    1 => {
                        let from = path.iter().position(|p| p.0 == s).expect("on the path");
                        let mut c: Vec<usize> = path[from..].iter().map(|p| p.0).collect();
                        c.push(s);
                        return Some(c);
                    }
                    _ => {}
                }
            } else {
                state[node] = 2;
                path.pop();
            }
        }
    }
    None
}

/// Job `j`'s CPU: spread evenly over `work` +-50 % by the golden-ratio
/// sequence rather than drawn from the run's RNG, so every policy compiles
/// the same jobs (a policy that draws random numbers of its own would
/// otherwise get other job sizes: 700 draws vary the total by ~1 %).
fn job_work(work: u64, j: usize) -> u64 {
    let frac = (j as f64 * 0.618_033_988_749_895).fract();
    (work as f64 * (0.5 + frac)) as u64
}

pub(super) fn build(spec: &Spec, v: &Resolved) -> Result<WorkloadDef, SimError> {
    let (jobs, units) = (v.u64("jobs"), v.u64("units") as usize);
    let edges = edges(spec, v.get("dag"), units)?;
    let (work, read, write, link) = (v.u64("work"), v.u64("read"), v.u64("write"), v.u64("link"));
    let mut wl = empty("make");
    // Channel 0: the job slots; 1: finished compile jobs (for the link); then one per edge.
    wl.channels = vec![jobs, units as u64];
    let (slot, finished) = (0, 1);
    let edge_ch = |k: usize| 2 + k;
    wl.channels.extend(std::iter::repeat_n(1, edges.len()));
    for j in 0..units {
        let mut prog: Vec<Step> =
            edges.iter().enumerate().filter(|(_, e)| e.1 == j).map(|(k, _)| Step::Recv(edge_ch(k))).collect();
        prog.push(Step::Recv(slot));
        if read > 0 {
            prog.push(Step::Sleep(Dur::Fixed(read)));
        }
        prog.push(Step::Run(Dur::Fixed(job_work(work, j))));
        if write > 0 {
            prog.push(Step::Sleep(Dur::Fixed(write)));
        }
        prog.push(Step::Send(slot));
        prog.extend(edges.iter().enumerate().filter(|(_, e)| e.0 == j).map(|(k, _)| Step::Send(edge_ch(k))));
        prog.push(Step::Send(finished));
        wl.tasks.push(task(&format!("cc{j}"), Class::Normal, 0, 1, prog));
    }
    let mut ld = vec![Step::Loop(Some(units as u64), vec![Step::Recv(finished)]), Step::Recv(slot)];
    if link > 0 {
        ld.push(Step::Run(Dur::Fixed(link)));
    }
    ld.push(Step::Send(slot));
    wl.tasks.push(task("link", Class::Normal, 0, 1, ld));
    // make itself: hands out the -j slots, then waits for its jobs (not modelled further).
    wl.tasks.push(task("make", Class::Normal, 0, 1, vec![Step::Loop(Some(jobs), vec![Step::Send(slot)])]));
    wl.report = Report::Make;
    wl.headline = vec!["wall_time".into(), "cpu_percent".into()];
    Ok(wl)
}

#[cfg(test)]
mod tests {
    use super::find_cycle;

    #[test]
    fn cycles_are_found_with_their_path() {
        assert_eq!(find_cycle(&[(0, 1), (1, 2)], 3), None);
        assert_eq!(find_cycle(&[(0, 1), (1, 2), (2, 0)], 3), Some(vec![0, 1, 2, 0]));
        // A diamond is no cycle; a back edge below it is.
        assert_eq!(find_cycle(&[(0, 1), (0, 2), (1, 3), (2, 3)], 4), None);
        assert_eq!(find_cycle(&[(0, 1), (1, 3), (3, 4), (4, 1)], 5), Some(vec![1, 3, 4, 1]));
    }
}
