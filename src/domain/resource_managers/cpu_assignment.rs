//! Which of the free CPUs an exclusive request takes (upstream v1.26
//! `cpumanager/cpu_assignment.go`): `take_by_topology_numa_packed` fills whole NUMA nodes
//! and sockets first, then whole cores, then single threads, each level sorted so the
//! emptiest groups are drained first; `take_by_topology_numa_distributed`
//! (`distribute-cpus-across-numa`) spreads a request over the fewest NUMA nodes evenly.

use std::collections::BTreeMap;

use super::topology::{CpuDetails, CpuTopology};
use crate::domain::units::cpuset::CpuSet;

/// Why CPUs could not be taken, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuAssignmentError {
    #[error("not enough cpus available to satisfy request")]
    NotEnoughCpus,
    #[error("failed to allocate cpus")]
    Failed,
    #[error("accounting error, not enough CPUs allocated, remaining: {0}")]
    TooFew(i64),
    #[error("accounting error, too many CPUs allocated, remaining: {0}")]
    TooMany(i64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LoopControl {
    Continue,
    Break,
}

/// The state of one allocation (upstream's `cpuAccumulator`): what is still free, what is
/// taken, and how many are still needed.
pub(crate) struct CpuAccumulator<'a> {
    topo: &'a CpuTopology,
    details: CpuDetails,
    num_cpus_needed: i64,
    result: CpuSet,
    /// NUMA nodes are the outer level when each holds one or more sockets
    /// (upstream's `numaFirst`); otherwise sockets are (`socketsFirst`).
    numa_first: bool,
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl<'a> CpuAccumulator<'a> {
    pub(crate) fn new(topo: &'a CpuTopology, available: &CpuSet, num_cpus: usize) -> Self {
        CpuAccumulator {
            topo,
            details: topo.cpu_details.keep_only(available),
            num_cpus_needed: to_i64(num_cpus),
            result: CpuSet::default(),
            numa_first: topo.num_sockets >= topo.num_numa_nodes,
        }
    }

    /// Sorts ids by how many free CPUs each holds, fewest first, then by id: the
    /// emptiest groups are drained first, keeping fuller ones whole for later requests.
    fn sort(&self, ids: &mut [usize], cpus_of: impl Fn(&CpuDetails, usize) -> usize) {
        ids.sort_by_key(|id| (cpus_of(&self.details, *id), *id));
    }

    fn sorted_numa_nodes(&self) -> Vec<usize> {
        if self.numa_first {
            let mut numas: Vec<usize> = self.details.numa_nodes().iter().collect();
            self.sort(&mut numas, |d, id| d.cpus_in_numa_nodes(&[id]).len());
            numas
        } else {
            let mut result = Vec::new();
            for socket in self.sorted_sockets() {
                let mut numas: Vec<usize> = self
                    .details
                    .numa_nodes_in_sockets(&[socket])
                    .iter()
                    .collect();
                self.sort(&mut numas, |d, id| d.cpus_in_numa_nodes(&[id]).len());
                result.extend(numas);
            }
            result
        }
    }

    fn sorted_sockets(&self) -> Vec<usize> {
        if self.numa_first {
            let mut result = Vec::new();
            for numa in self.sorted_numa_nodes() {
                let mut sockets: Vec<usize> =
                    self.details.sockets_in_numa_nodes(&[numa]).iter().collect();
                self.sort(&mut sockets, |d, id| d.cpus_in_sockets(&[id]).len());
                result.extend(sockets);
            }
            result
        } else {
            let mut sockets: Vec<usize> = self.details.sockets().iter().collect();
            self.sort(&mut sockets, |d, id| d.cpus_in_sockets(&[id]).len());
            sockets
        }
    }

    fn sorted_cores(&self) -> Vec<usize> {
        let mut result = Vec::new();
        if self.numa_first {
            // Cores sit directly below sockets.
            for socket in self.sorted_sockets() {
                let mut cores: Vec<usize> =
                    self.details.cores_in_sockets(&[socket]).iter().collect();
                self.sort(&mut cores, |d, id| d.cpus_in_cores(&[id]).len());
                result.extend(cores);
            }
        } else {
            // Cores sit directly below NUMA nodes.
            for numa in self.sorted_numa_nodes() {
                let mut cores: Vec<usize> =
                    self.details.cores_in_numa_nodes(&[numa]).iter().collect();
                self.sort(&mut cores, |d, id| d.cpus_in_cores(&[id]).len());
                result.extend(cores);
            }
        }
        result
    }

    /// Free CPUs core by core in core order, each core's threads ascending.
    fn sorted_cpus(&self) -> Vec<usize> {
        let mut result = Vec::new();
        for core in self.sorted_cores() {
            result.extend(self.details.cpus_in_cores(&[core]).iter());
        }
        result
    }

    fn is_numa_node_free(&self, numa: usize) -> bool {
        self.details.cpus_in_numa_nodes(&[numa]).len()
            == self.topo.cpu_details.cpus_in_numa_nodes(&[numa]).len()
    }

    fn is_socket_free(&self, socket: usize) -> bool {
        self.details.cpus_in_sockets(&[socket]).len() == self.topo.cpus_per_socket()
    }

    fn is_core_free(&self, core: usize) -> bool {
        self.details.cpus_in_cores(&[core]).len() == self.topo.cpus_per_core()
    }

    pub(crate) fn free_numa_nodes(&self) -> Vec<usize> {
        let sorted = self.sorted_numa_nodes();
        sorted
            .into_iter()
            .filter(|n| self.is_numa_node_free(*n))
            .collect()
    }

    pub(crate) fn free_sockets(&self) -> Vec<usize> {
        let sorted = self.sorted_sockets();
        sorted
            .into_iter()
            .filter(|s| self.is_socket_free(*s))
            .collect()
    }

    pub(crate) fn free_cores(&self) -> Vec<usize> {
        let sorted = self.sorted_cores();
        sorted
            .into_iter()
            .filter(|c| self.is_core_free(*c))
            .collect()
    }

    #[cfg(test)]
    pub(crate) fn free_cpus(&self) -> Vec<usize> {
        self.sorted_cpus()
    }

    pub(crate) fn take(&mut self, cpus: &CpuSet) {
        self.result = self.result.union(cpus);
        self.details = self
            .details
            .keep_only(&self.details.cpus().difference(&self.result));
        self.num_cpus_needed -= to_i64(cpus.len());
    }

    fn take_full_numa_nodes(&mut self) {
        for numa in self.free_numa_nodes() {
            let cpus = self.topo.cpu_details.cpus_in_numa_nodes(&[numa]);
            if self.needs(cpus.len()) {
                self.take(&cpus);
            }
        }
    }

    fn take_full_sockets(&mut self) {
        for socket in self.free_sockets() {
            let cpus = self.topo.cpu_details.cpus_in_sockets(&[socket]);
            if self.needs(cpus.len()) {
                self.take(&cpus);
            }
        }
    }

    fn take_full_cores(&mut self) {
        for core in self.free_cores() {
            let cpus = self.topo.cpu_details.cpus_in_cores(&[core]);
            if self.needs(cpus.len()) {
                self.take(&cpus);
            }
        }
    }

    fn take_remaining_cpus(&mut self) {
        for cpu in self.sorted_cpus() {
            self.take(&CpuSet::new([cpu]));
            if self.is_satisfied() {
                return;
            }
        }
    }

    fn take_full_first_level(&mut self) {
        if self.numa_first {
            self.take_full_numa_nodes();
        } else {
            self.take_full_sockets();
        }
    }

    fn take_full_second_level(&mut self) {
        if self.numa_first {
            self.take_full_sockets();
        } else {
            self.take_full_numa_nodes();
        }
    }

    /// The fewest and the most NUMA nodes a request could span, in groups of
    /// `cpu_group_size` CPUs.
    fn range_numa_nodes_needed_to_satisfy(&self, cpu_group_size: usize) -> (usize, usize) {
        let num_numa_nodes = self.topo.cpu_details.numa_nodes().len().max(1);
        let num_numa_nodes_available = self.details.numa_nodes().len();
        let num_cpus = self.topo.cpu_details.cpus().len();
        let group = cpu_group_size.max(1);
        let num_cpu_groups = num_cpus.saturating_sub(1) / group + 1;
        let num_cpu_groups_per_numa_node = (num_cpu_groups - 1) / num_numa_nodes + 1;
        let needed = usize::try_from(self.num_cpus_needed).unwrap_or(0);
        let num_cpu_groups_needed = needed.saturating_sub(1) / group + 1;
        let min_numas = (num_cpu_groups_needed - 1) / num_cpu_groups_per_numa_node + 1;
        let max_numas = num_cpu_groups_needed.min(num_numa_nodes_available);
        (min_numas, max_numas)
    }

    fn needs(&self, n: usize) -> bool {
        self.num_cpus_needed >= to_i64(n)
    }

    pub(crate) fn is_satisfied(&self) -> bool {
        self.num_cpus_needed < 1
    }

    pub(crate) fn is_failed(&self) -> bool {
        self.num_cpus_needed > to_i64(self.details.cpus().len())
    }

    #[cfg(test)]
    pub(crate) fn num_cpus_needed(&self) -> i64 {
        self.num_cpus_needed
    }
}

/// Calls `f` on every `k`-element subset of `n`, in lexicographic order of positions,
/// until it answers `Break`.
fn iterate_combinations(n: &[usize], k: usize, f: &mut dyn FnMut(&[usize]) -> LoopControl) {
    fn helper(
        n: &[usize],
        k: usize,
        start: usize,
        accum: &mut Vec<usize>,
        f: &mut dyn FnMut(&[usize]) -> LoopControl,
    ) -> LoopControl {
        if k == 0 {
            return f(accum);
        }
        let mut i = start;
        while i + k <= n.len() {
            accum.push(n[i]);
            let control = helper(n, k - 1, i + 1, accum, f);
            accum.pop();
            if control == LoopControl::Break {
                return LoopControl::Break;
            }
            i += 1;
        }
        LoopControl::Continue
    }
    if k < 1 {
        return;
    }
    helper(n, k, 0, &mut Vec::with_capacity(k), f);
}

/// `num_cpus` CPUs of `available`, packed: whole NUMA nodes and sockets when the request
/// needs at least that many, then whole cores, then single threads (upstream's
/// `takeByTopologyNUMAPacked`).
pub fn take_by_topology_numa_packed(
    topo: &CpuTopology,
    available: &CpuSet,
    num_cpus: usize,
) -> Result<CpuSet, CpuAssignmentError> {
    let mut acc = CpuAccumulator::new(topo, available, num_cpus);
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    if acc.is_failed() {
        return Err(CpuAssignmentError::NotEnoughCpus);
    }
    acc.take_full_first_level();
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    acc.take_full_second_level();
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    acc.take_full_cores();
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    acc.take_remaining_cpus();
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    Err(CpuAssignmentError::Failed)
}

/// Rounded to three decimals as upstream rounds, so that near-equal balances tie the
/// same way.
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn standard_deviation(xs: &[usize]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let len = xs.len() as f64;
    let mean = round3(xs.iter().map(|x| *x as f64).sum::<f64>() / len);
    let sum: f64 = xs
        .iter()
        .map(|x| (*x as f64 - mean) * (*x as f64 - mean))
        .sum();
    round3((sum / len).sqrt())
}

/// `num_cpus` CPUs of `available`, spread evenly over the fewest NUMA nodes that can hold
/// them in groups of `cpu_group_size`, the remainder going where it keeps the free CPUs
/// per NUMA node most balanced (upstream's `takeByTopologyNUMADistributed`, KEP-2902);
/// packed when the request is no multiple of the group size, or no spread fits.
pub fn take_by_topology_numa_distributed(
    topo: &CpuTopology,
    available: &CpuSet,
    num_cpus: usize,
    cpu_group_size: usize,
) -> Result<CpuSet, CpuAssignmentError> {
    let group = cpu_group_size.max(1);
    if !num_cpus.is_multiple_of(group) {
        return take_by_topology_numa_packed(topo, available, num_cpus);
    }
    let mut acc = CpuAccumulator::new(topo, available, num_cpus);
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    if acc.is_failed() {
        return Err(CpuAssignmentError::NotEnoughCpus);
    }
    let numas = acc.sorted_numa_nodes();
    let (min_numas, max_numas) = acc.range_numa_nodes_needed_to_satisfy(group);

    for k in min_numas..=max_numas {
        let mut best_balance = f64::MAX;
        let mut best_remainder: Vec<usize> = Vec::new();
        let mut best_combo: Option<Vec<usize>> = None;
        let details = &acc.details;
        let free_in = |numa: usize| details.cpus_in_numa_nodes(&[numa]).len();
        iterate_combinations(&numas, k, &mut |combo: &[usize]| {
            if best_balance == 0.0 {
                return LoopControl::Break;
            }
            if details.cpus_in_numa_nodes(combo).len() < num_cpus {
                return LoopControl::Continue;
            }
            let num_cpu_groups: usize = combo.iter().map(|n| free_in(*n) / group).sum();
            if num_cpu_groups * group < num_cpus {
                return LoopControl::Continue;
            }
            let distribution = (num_cpus / combo.len() / group) * group;
            if combo.iter().any(|n| free_in(*n) < distribution) {
                return LoopControl::Continue;
            }
            let mut after: BTreeMap<usize, usize> =
                numas.iter().map(|n| (*n, free_in(*n))).collect();
            for numa in combo {
                if let Some(v) = after.get_mut(numa) {
                    *v -= distribution;
                }
            }
            let remainder = num_cpus - distribution * combo.len();
            let remainder_combo: Vec<usize> = combo
                .iter()
                .copied()
                .filter(|n| after.get(n).copied().unwrap_or(0) >= group)
                .collect();

            let mut best_local_balance = f64::MAX;
            let mut best_local_remainder: Vec<usize> = Vec::new();
            if remainder == 0 {
                best_local_balance =
                    standard_deviation(&after.values().copied().collect::<Vec<_>>());
            }
            let mut rk = remainder_combo.len();
            while remainder > 0 && rk >= 1 {
                iterate_combinations(&remainder_combo, rk, &mut |subset: &[usize]| {
                    let mut remainder = remainder;
                    let mut after = after.clone();
                    let room: usize = subset
                        .iter()
                        .map(|n| after.get(n).copied().unwrap_or(0))
                        .sum();
                    if room < remainder {
                        return LoopControl::Continue;
                    }
                    while remainder > 0 {
                        let before = remainder;
                        for numa in subset {
                            if remainder == 0 {
                                break;
                            }
                            let Some(v) = after.get_mut(numa) else {
                                continue;
                            };
                            if *v < group {
                                continue;
                            }
                            *v -= group;
                            remainder = remainder.saturating_sub(group);
                        }
                        // Upstream would spin here; no progress means this subset cannot
                        // take the remainder in whole groups.
                        if remainder == before {
                            return LoopControl::Continue;
                        }
                    }
                    let balance = standard_deviation(&after.values().copied().collect::<Vec<_>>());
                    if balance < best_local_balance {
                        best_local_balance = balance;
                        best_local_remainder = subset.to_vec();
                    }
                    LoopControl::Continue
                });
                rk -= 1;
            }
            if best_local_balance < best_balance {
                best_balance = best_local_balance;
                best_remainder = best_local_remainder;
                best_combo = Some(combo.to_vec());
            }
            LoopControl::Continue
        });

        let Some(best_combo) = best_combo else {
            continue;
        };
        let distribution = (num_cpus / best_combo.len() / group) * group;
        for numa in &best_combo {
            let free = acc.details.cpus_in_numa_nodes(&[*numa]);
            let cpus = take_by_topology_numa_packed(acc.topo, &free, distribution)?;
            acc.take(&cpus);
        }
        let mut remainder = num_cpus - distribution * best_combo.len();
        while remainder > 0 {
            let before = remainder;
            for numa in &best_remainder {
                if remainder == 0 {
                    break;
                }
                let free = acc.details.cpus_in_numa_nodes(&[*numa]);
                if free.len() < group {
                    continue;
                }
                let cpus = take_by_topology_numa_packed(acc.topo, &free, group)?;
                acc.take(&cpus);
                remainder = remainder.saturating_sub(group);
            }
            if remainder == before {
                break;
            }
        }
        if acc.num_cpus_needed > 0 {
            return Err(CpuAssignmentError::TooFew(acc.num_cpus_needed));
        }
        if acc.num_cpus_needed < 0 {
            return Err(CpuAssignmentError::TooMany(acc.num_cpus_needed));
        }
        return Ok(acc.result);
    }
    take_by_topology_numa_packed(topo, available, num_cpus)
}

#[cfg(test)]
mod tests {
    //! Upstream v1.26's cpu_assignment_test.go tables, generated from its source.
    use super::*;
    use crate::domain::resource_managers::fixtures::*;

    fn set(cpus: &[usize]) -> CpuSet {
        CpuSet::new(cpus.iter().copied())
    }

    fn parse(s: &str) -> CpuSet {
        CpuSet::parse(s).expect("valid test cpuset")
    }

    fn check_free(
        cases: Vec<(&str, &CpuTopology, CpuSet, Vec<usize>)>,
        sorted: bool,
        free: impl Fn(&CpuAccumulator) -> Vec<usize>,
    ) {
        for (description, topo, available, expect) in cases {
            let acc = CpuAccumulator::new(topo, &available, 0);
            let mut result = free(&acc);
            if sorted {
                result.sort_unstable();
            }
            assert_eq!(result, expect, "{description}");
        }
    }

    #[test]
    fn accumulator_free_sockets() {
        let cases = vec![
            (
                "single socket HT, 1 socket free",
                topo_single_socket_ht(),
                set(&[0, 1, 2, 3, 4, 5, 6, 7]),
                vec![0],
            ),
            (
                "single socket HT, 0 sockets free",
                topo_single_socket_ht(),
                set(&[1, 2, 3, 4, 5, 6, 7]),
                vec![],
            ),
            (
                "dual socket HT, 2 sockets free",
                topo_dual_socket_ht(),
                set(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
                vec![0, 1],
            ),
            (
                "dual socket HT, 1 socket free",
                topo_dual_socket_ht(),
                set(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11]),
                vec![1],
            ),
            (
                "dual socket HT, 0 sockets free",
                topo_dual_socket_ht(),
                set(&[0, 2, 3, 4, 5, 6, 7, 8, 9, 11]),
                vec![],
            ),
            (
                "dual socket, multi numa per socket, HT, 2 sockets free",
                topo_dual_socket_multi_numa_per_socket_ht(),
                parse("0-79"),
                vec![0, 1],
            ),
            (
                "dual socket, multi numa per socket, HT, 1 sockets free",
                topo_dual_socket_multi_numa_per_socket_ht(),
                parse("1-79"),
                vec![1],
            ),
            (
                "dual socket, multi numa per socket, HT, 0 sockets free",
                topo_dual_socket_multi_numa_per_socket_ht(),
                parse("1-78"),
                vec![],
            ),
            (
                "dual numa, multi socket per per socket, HT, 4 sockets free",
                fake_topo_multi_socket_dual_socket_per_numa_ht(),
                parse("0-79"),
                vec![0, 1, 2, 3],
            ),
            (
                "dual numa, multi socket per per socket, HT, 3 sockets free",
                fake_topo_multi_socket_dual_socket_per_numa_ht(),
                parse("0-19,21-79"),
                vec![0, 1, 3],
            ),
            (
                "dual numa, multi socket per per socket, HT, 2 sockets free",
                fake_topo_multi_socket_dual_socket_per_numa_ht(),
                parse("0-59,61-78"),
                vec![0, 1],
            ),
            (
                "dual numa, multi socket per per socket, HT, 1 sockets free",
                fake_topo_multi_socket_dual_socket_per_numa_ht(),
                parse("1-19,21-38,41-60,61-78"),
                vec![1],
            ),
            (
                "dual numa, multi socket per per socket, HT, 0 sockets free",
                fake_topo_multi_socket_dual_socket_per_numa_ht(),
                parse("0-40,42-49,51-68,71-79"),
                vec![],
            ),
        ];
        check_free(cases, true, |a| a.free_sockets());
    }

    #[test]
    fn accumulator_free_numa_nodes() {
        let cases = vec![
            (
                "single socket HT, 1 NUMA node free",
                topo_single_socket_ht(),
                set(&[0, 1, 2, 3, 4, 5, 6, 7]),
                vec![0],
            ),
            (
                "single socket HT, 0 NUMA Node free",
                topo_single_socket_ht(),
                set(&[1, 2, 3, 4, 5, 6, 7]),
                vec![],
            ),
            (
                "dual socket HT, 2 NUMA Node free",
                topo_dual_socket_ht(),
                set(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
                vec![0, 1],
            ),
            (
                "dual socket HT, 1 NUMA Node free",
                topo_dual_socket_ht(),
                set(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11]),
                vec![1],
            ),
            (
                "dual socket HT, 0 NUMA node free",
                topo_dual_socket_ht(),
                set(&[0, 2, 3, 4, 5, 6, 7, 8, 9, 11]),
                vec![],
            ),
            (
                "dual socket, multi numa per socket, HT, 4 NUMA Node free",
                topo_dual_socket_multi_numa_per_socket_ht(),
                parse("0-79"),
                vec![0, 1, 2, 3],
            ),
            (
                "dual socket, multi numa per socket, HT, 3 NUMA node free",
                topo_dual_socket_multi_numa_per_socket_ht(),
                parse("1-79"),
                vec![1, 2, 3],
            ),
            (
                "dual socket, multi numa per socket, HT, 2 NUMA node free",
                topo_dual_socket_multi_numa_per_socket_ht(),
                parse("1-9,11-79"),
                vec![2, 3],
            ),
            (
                "dual socket, multi numa per socket, HT, 1 NUMA node free",
                topo_dual_socket_multi_numa_per_socket_ht(),
                parse("1-9,11-59,61-79"),
                vec![3],
            ),
            (
                "dual socket, multi numa per socket, HT, 0 NUMA node free",
                topo_dual_socket_multi_numa_per_socket_ht(),
                parse("1-9,11-59,61-78"),
                vec![],
            ),
            (
                "dual numa, multi socket per per socket, HT, 2 NUMA node free",
                fake_topo_multi_socket_dual_socket_per_numa_ht(),
                parse("0-79"),
                vec![0, 1],
            ),
            (
                "dual numa, multi socket per per socket, HT, 1 NUMA node free",
                fake_topo_multi_socket_dual_socket_per_numa_ht(),
                parse("0-9,11-79"),
                vec![1],
            ),
            (
                "dual numa, multi socket per per socket, HT, 0 sockets free",
                fake_topo_multi_socket_dual_socket_per_numa_ht(),
                parse("0-9,11-59,61-79"),
                vec![],
            ),
        ];
        check_free(cases, false, |a| a.free_numa_nodes());
    }

    #[test]
    fn accumulator_free_sockets_and_numa_nodes() {
        let cases = vec![
            (
                "dual socket, multi numa per socket, HT, 2 Socket/4 NUMA Node free",
                topo_dual_socket_multi_numa_per_socket_ht(),
                parse("0-79"),
                vec![0, 1],
                vec![0, 1, 2, 3],
            ),
            (
                "dual socket, multi numa per socket, HT, 1 Socket/3 NUMA node free",
                topo_dual_socket_multi_numa_per_socket_ht(),
                parse("1-79"),
                vec![1],
                vec![1, 2, 3],
            ),
            (
                "dual socket, multi numa per socket, HT, 1 Socket/ 2 NUMA node free",
                topo_dual_socket_multi_numa_per_socket_ht(),
                parse("1-9,11-79"),
                vec![1],
                vec![2, 3],
            ),
            (
                "dual socket, multi numa per socket, HT, 0 Socket/ 2 NUMA node free",
                topo_dual_socket_multi_numa_per_socket_ht(),
                parse("1-59,61-79"),
                vec![],
                vec![1, 3],
            ),
        ];
        for (description, topo, available, sockets, numa_nodes) in cases {
            let acc = CpuAccumulator::new(topo, &available, 0);
            assert_eq!(acc.free_numa_nodes(), numa_nodes, "{description}");
            assert_eq!(acc.free_sockets(), sockets, "{description}");
        }
    }

    #[test]
    fn accumulator_free_cores() {
        let cases = vec![
            (
                "single socket HT, 4 cores free",
                topo_single_socket_ht(),
                set(&[0, 1, 2, 3, 4, 5, 6, 7]),
                vec![0, 1, 2, 3],
            ),
            (
                "single socket HT, 3 cores free",
                topo_single_socket_ht(),
                set(&[0, 1, 2, 4, 5, 6]),
                vec![0, 1, 2],
            ),
            (
                "single socket HT, 3 cores free (1 partially consumed)",
                topo_single_socket_ht(),
                set(&[0, 1, 2, 3, 4, 5, 6]),
                vec![0, 1, 2],
            ),
            (
                "single socket HT, 0 cores free",
                topo_single_socket_ht(),
                set(&[]),
                vec![],
            ),
            (
                "single socket HT, 0 cores free (4 partially consumed)",
                topo_single_socket_ht(),
                set(&[0, 1, 2, 3]),
                vec![],
            ),
            (
                "dual socket HT, 6 cores free",
                topo_dual_socket_ht(),
                set(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
                vec![0, 2, 4, 1, 3, 5],
            ),
            (
                "dual socket HT, 5 cores free (1 consumed from socket 0)",
                topo_dual_socket_ht(),
                set(&[2, 1, 3, 4, 5, 7, 8, 9, 10, 11]),
                vec![2, 4, 1, 3, 5],
            ),
            (
                "dual socket HT, 4 cores free (1 consumed from each socket)",
                topo_dual_socket_ht(),
                set(&[2, 3, 4, 5, 8, 9, 10, 11]),
                vec![2, 4, 3, 5],
            ),
        ];
        check_free(cases, false, |a| a.free_cores());
    }

    #[test]
    fn accumulator_free_cpus() {
        let cases = vec![
            (
                "single socket HT, 8 cpus free",
                topo_single_socket_ht(),
                set(&[0, 1, 2, 3, 4, 5, 6, 7]),
                vec![0, 4, 1, 5, 2, 6, 3, 7],
            ),
            (
                "single socket HT, 5 cpus free",
                topo_single_socket_ht(),
                set(&[3, 4, 5, 6, 7]),
                vec![4, 5, 6, 3, 7],
            ),
            (
                "dual socket HT, 12 cpus free",
                topo_dual_socket_ht(),
                set(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
                vec![0, 6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11],
            ),
            (
                "dual socket HT, 11 cpus free",
                topo_dual_socket_ht(),
                set(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
                vec![6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11],
            ),
            (
                "dual socket HT, 10 cpus free",
                topo_dual_socket_ht(),
                set(&[1, 2, 3, 4, 5, 7, 8, 9, 10, 11]),
                vec![2, 8, 4, 10, 1, 7, 3, 9, 5, 11],
            ),
            (
                "triple socket HT, 12 cpus free",
                topo_triple_socket_ht(),
                set(&[0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13]),
                vec![12, 13, 0, 1, 2, 3, 6, 7, 8, 9, 10, 11],
            ),
        ];
        check_free(cases, false, |a| a.free_cpus());
    }

    #[test]
    fn accumulator_take() {
        let cases = vec![
            (
                "take 0 cpus from a single socket HT, require 1",
                topo_single_socket_ht(),
                set(&[0, 1, 2, 3, 4, 5, 6, 7]),
                vec![set(&[])],
                1,
                false,
                false,
            ),
            (
                "take 0 cpus from a single socket HT, require 1, none available",
                topo_single_socket_ht(),
                set(&[]),
                vec![set(&[])],
                1,
                false,
                true,
            ),
            (
                "take 1 cpu from a single socket HT, require 1",
                topo_single_socket_ht(),
                set(&[0, 1, 2, 3, 4, 5, 6, 7]),
                vec![set(&[0])],
                1,
                true,
                false,
            ),
            (
                "take 1 cpu from a single socket HT, require 2",
                topo_single_socket_ht(),
                set(&[0, 1, 2, 3, 4, 5, 6, 7]),
                vec![set(&[0])],
                2,
                false,
                false,
            ),
            (
                "take 2 cpu from a single socket HT, require 4, expect failed",
                topo_single_socket_ht(),
                set(&[0, 1, 2]),
                vec![set(&[0]), set(&[1])],
                4,
                false,
                true,
            ),
            (
                "take all cpus one at a time from a single socket HT, require 8",
                topo_single_socket_ht(),
                set(&[0, 1, 2, 3, 4, 5, 6, 7]),
                vec![
                    set(&[0]),
                    set(&[1]),
                    set(&[2]),
                    set(&[3]),
                    set(&[4]),
                    set(&[5]),
                    set(&[6]),
                    set(&[7]),
                ],
                8,
                true,
                false,
            ),
        ];
        for (description, topo, available, takes, num_cpus, satisfied, failed) in cases {
            let mut acc = CpuAccumulator::new(topo, &available, num_cpus);
            let mut taken = 0;
            for cpus in &takes {
                acc.take(cpus);
                taken += cpus.len();
            }
            assert_eq!(acc.is_satisfied(), satisfied, "{description}: satisfied");
            assert_eq!(acc.is_failed(), failed, "{description}: failed");
            for cpus in &takes {
                assert!(
                    cpus.iter().all(|c| !acc.details.cpus().contains(c)),
                    "{description}: taken cpus still free"
                );
                assert!(
                    cpus.is_subset_of(&acc.result),
                    "{description}: not in result"
                );
            }
            assert_eq!(
                acc.num_cpus_needed(),
                num_cpus as i64 - taken as i64,
                "{description}"
            );
        }
    }

    type TakeCase = (
        &'static str,
        &'static CpuTopology,
        CpuSet,
        usize,
        &'static str,
        CpuSet,
    );

    fn common_take_by_topology_cases() -> Vec<TakeCase> {
        vec![
            ("take more cpus than are available from single socket with HT", topo_single_socket_ht(), set(&[0, 2, 4, 6]), 5, "not enough cpus available to satisfy request", set(&[])),
            ("take zero cpus from single socket with HT", topo_single_socket_ht(), set(&[0, 1, 2, 3, 4, 5, 6, 7]), 0, "", set(&[])),
            ("take one cpu from single socket with HT", topo_single_socket_ht(), set(&[0, 1, 2, 3, 4, 5, 6, 7]), 1, "", set(&[0])),
            ("take one cpu from single socket with HT, some cpus are taken", topo_single_socket_ht(), set(&[1, 3, 5, 6, 7]), 1, "", set(&[6])),
            ("take two cpus from single socket with HT", topo_single_socket_ht(), set(&[0, 1, 2, 3, 4, 5, 6, 7]), 2, "", set(&[0, 4])),
            ("take all cpus from single socket with HT", topo_single_socket_ht(), set(&[0, 1, 2, 3, 4, 5, 6, 7]), 8, "", set(&[0, 1, 2, 3, 4, 5, 6, 7])),
            ("take two cpus from single socket with HT, only one core totally free", topo_single_socket_ht(), set(&[0, 1, 2, 3, 6]), 2, "", set(&[2, 6])),
            ("take a socket of cpus from dual socket with HT", topo_dual_socket_ht(), set(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]), 6, "", set(&[0, 2, 4, 6, 8, 10])),
            ("take a socket of cpus from dual socket with multi-numa-per-socket with HT", topo_dual_socket_multi_numa_per_socket_ht(), parse("0-79"), 40, "", parse("0-19,40-59")),
            ("take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT", topo_dual_socket_multi_numa_per_socket_ht(), parse("0-79"), 20, "", parse("0-9,40-49")),
            ("take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, with 1 NUMA node already taken", topo_dual_socket_multi_numa_per_socket_ht(), parse("10-39,50-79"), 20, "", parse("10-19,50-59")),
            ("take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT", topo_dual_socket_multi_numa_per_socket_ht(), parse("0-79"), 60, "", parse("0-29,40-69")),
            ("take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, a core taken", topo_dual_socket_multi_numa_per_socket_ht(), parse("1-39,41-79"), 60, "", parse("10-39,50-79")),
        ]
    }

    #[test]
    fn take_by_topology_numa_packed_cases() {
        let mut cases = common_take_by_topology_cases();
        cases.extend(vec![
            ("take one cpu from dual socket with HT - core from Socket 0", topo_dual_socket_ht(), set(&[1, 2, 3, 4, 5, 7, 8, 9, 10, 11]), 1, "", set(&[2])),
            ("allocate 4 full cores with 3 coming from the first NUMA node (filling it up) and 1 coming from the second NUMA node", topo_dual_socket_ht(), parse("0-11"), 8, "", parse("0,6,2,8,4,10,1,7")),
            ("allocate 32 full cores with 30 coming from the first 3 NUMA nodes (filling them up) and 2 coming from the fourth NUMA node", topo_dual_socket_multi_numa_per_socket_ht(), parse("0-79"), 64, "", parse("0-29,40-69,30,31,70,71")),
        ]);
        for (description, topo, available, num_cpus, exp_err, exp_result) in cases {
            let result = take_by_topology_numa_packed(topo, &available, num_cpus);
            match result {
                Ok(cpus) => {
                    assert_eq!(exp_err, "", "{description}: expected an error");
                    assert_eq!(cpus, exp_result, "{description}");
                }
                Err(e) => {
                    assert_eq!(e.to_string(), exp_err, "{description}");
                    assert!(exp_result.is_empty(), "{description}");
                }
            }
        }
    }

    #[test]
    fn take_by_topology_numa_distributed_cases() {
        let mut cases: Vec<(&str, &CpuTopology, CpuSet, usize, usize, &str, CpuSet)> =
            common_take_by_topology_cases()
                .into_iter()
                .map(|(d, topo, a, n, e, r)| (d, topo, a, n, 1, e, r))
                .collect();
        cases.extend(vec![
            ("allocate 4 full cores with 2 distributed across each NUMA node", topo_dual_socket_ht(), parse("0-11"), 8, 1, "", parse("0,6,2,8,1,7,3,9")),
            ("allocate 32 full cores with 8 distributed across each NUMA node", topo_dual_socket_multi_numa_per_socket_ht(), parse("0-79"), 64, 1, "", parse("0-7,10-17,20-27,30-37,40-47,50-57,60-67,70-77")),
            ("allocate 24 full cores with 8 distributed across the first 3 NUMA nodes", topo_dual_socket_multi_numa_per_socket_ht(), parse("0-79"), 48, 1, "", parse("0-7,10-17,20-27,40-47,50-57,60-67")),
            ("allocate 24 full cores with 8 distributed across the first 3 NUMA nodes (taking all but 2 from the first NUMA node)", topo_dual_socket_multi_numa_per_socket_ht(), parse("1-29,32-39,41-69,72-79"), 48, 1, "", parse("1-8,10-17,20-27,41-48,50-57,60-67")),
            ("allocate 24 full cores with 8 distributed across the last 3 NUMA nodes (even though all 8 could be allocated from the first NUMA node)", topo_dual_socket_multi_numa_per_socket_ht(), parse("2-29,31-39,42-69,71-79"), 48, 1, "", parse("10-17,20-27,31-38,50-57,60-67,71-78")),
            ("allocate 8 full cores with 2 distributed across each NUMA node", topo_dual_socket_multi_numa_per_socket_ht(), parse("0-2,10-12,20-22,30-32,40-41,50-51,60-61,70-71"), 16, 1, "", parse("0-1,10-11,20-21,30-31,40-41,50-51,60-61,70-71")),
            ("allocate 8 full cores with 2 distributed across each NUMA node", topo_dual_socket_multi_numa_per_socket_ht(), parse("0-2,10-12,20-22,30-32,40-41,50-51,60-61,70-71"), 16, 1, "", parse("0-1,10-11,20-21,30-31,40-41,50-51,60-61,70-71")),
            ("take one cpu from dual socket with HT - core from Socket 0", topo_dual_socket_ht(), set(&[1, 2, 3, 4, 5, 7, 8, 9, 10, 11]), 1, 1, "", set(&[1])),
            ("take one cpu from dual socket with HT - core from Socket 0 - cpuGroupSize 2", topo_dual_socket_ht(), set(&[1, 2, 3, 4, 5, 7, 8, 9, 10, 11]), 1, 2, "", set(&[2])),
            ("allocate 13 full cores distributed across the first 2 NUMA nodes", topo_dual_socket_multi_numa_per_socket_ht(), parse("0-79"), 26, 1, "", parse("0-6,10-16,40-45,50-55")),
            ("allocate 13 full cores distributed across the first 2 NUMA nodes (cpuGroupSize 2)", topo_dual_socket_multi_numa_per_socket_ht(), parse("0-79"), 26, 2, "", parse("0-6,10-15,40-46,50-55")),
            ("allocate 31 full cores with 15 CPUs distributed across each NUMA node and 1 CPU spilling over to each of NUMA 0, 1", topo_dual_socket_multi_numa_per_socket_ht(), parse("0-79"), 62, 1, "", parse("0-7,10-17,20-27,30-37,40-47,50-57,60-66,70-76")),
            ("allocate 31 full cores with 14 CPUs distributed across each NUMA node and 2 CPUs spilling over to each of NUMA 0, 1, 2 (cpuGroupSize 2)", topo_dual_socket_multi_numa_per_socket_ht(), parse("0-79"), 62, 2, "", parse("0-7,10-17,20-27,30-36,40-47,50-57,60-67,70-76")),
            ("allocate 31 full cores with 15 CPUs distributed across each NUMA node and 1 CPU spilling over to each of NUMA 2, 3 (to keep balance)", topo_dual_socket_multi_numa_per_socket_ht(), parse("0-8,10-18,20-39,40-48,50-58,60-79"), 62, 1, "", parse("0-7,10-17,20-27,30-37,40-46,50-56,60-67,70-77")),
            ("allocate 31 full cores with 14 CPUs distributed across each NUMA node and 2 CPUs spilling over to each of NUMA 0, 2, 3 (to keep balance with cpuGroupSize 2)", topo_dual_socket_multi_numa_per_socket_ht(), parse("0-8,10-18,20-39,40-48,50-58,60-79"), 62, 2, "", parse("0-7,10-16,20-27,30-37,40-47,50-56,60-67,70-77")),
            ("ensure bestRemainder chosen with NUMA nodes that have enough CPUs to satisfy the request", topo_dual_socket_multi_numa_per_socket_ht(), parse("0-3,10-13,20-23,30-36,40-43,50-53,60-63,70-76"), 34, 1, "", parse("0-3,10-13,20-23,30-34,40-43,50-53,60-63,70-74")),
            ("ensure previous failure encountered on live machine has been fixed (1/1)", topo_dual_socket_multi_numa_per_socket_ht_large(), parse("0,128,30,31,158,159,43-47,171-175,62,63,190,191,75-79,203-207,94,96,222,223,101-111,229-239,126,127,254,255"), 28, 1, "", parse("43-47,75-79,96,101-105,171-174,203-206,229-232")),
        ]);
        for (description, topo, available, num_cpus, group, exp_err, exp_result) in cases {
            match take_by_topology_numa_distributed(topo, &available, num_cpus, group) {
                Ok(cpus) => {
                    assert_eq!(exp_err, "", "{description}: expected an error");
                    assert_eq!(cpus, exp_result, "{description}");
                }
                Err(e) => assert_eq!(e.to_string(), exp_err, "{description}"),
            }
        }
    }
}
