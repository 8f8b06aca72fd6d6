package pod

import (
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcdversion"
)

// Defaults for what etcd and Kubernetes leave unset or set to a trap that
// users otherwise learn the hard way: a backend quota larger than the volume,
// no compaction, a Memory member without a memory limit.
// All are documented in docs/operations.md.
const (
	// MemoryHeadroom is added to a Memory member's tmpfs size to make its
	// default memory limit: tmpfs pages are charged to the container, and
	// etcd itself needs room beyond its data.
	MemoryHeadroom = "256Mi"
	// WALReserveBytes is what etcd's write-ahead log takes of the data dir
	// before anything is written: the live 64 MB segment and the next one,
	// which etcd preallocates ahead of need.
	WALReserveBytes = 2 * 64 * 1000 * 1000
	// QuotaFraction is the share of the data volume, after the WAL's reserve,
	// given to etcd's backend quota when none is set: a third for the
	// database, a third for the copy a defragmentation writes, and a third for
	// a database snapshot received from the leader and for snapshot files.
	QuotaFraction = 3
	// DefaultAutoCompactionMode and DefaultAutoCompactionRetention keep one
	// hour of history unless the user says otherwise; without compaction the
	// database only grows until it hits its quota.
	DefaultAutoCompactionMode      = "periodic"
	DefaultAutoCompactionRetention = "1h"

	zoneLabel     = "topology.kubernetes.io/zone"
	hostnameLabel = "kubernetes.io/hostname"
)

// defaultedResources applies the default requests and, for Memory members
// without a memory limit, a limit of the tmpfs size plus headroom.
func defaultedResources(m *v1alpha1.EtcdMember) corev1.ResourceRequirements {
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("100m"),
			corev1.ResourceMemory: resource.MustParse("128Mi"),
		},
	}
	if m.Spec.Resources != nil {
		res = *m.Spec.Resources.DeepCopy()
	}
	if m.Spec.Storage.Medium != v1alpha1.StorageMediumMemory {
		return res
	}
	if _, set := res.Limits[corev1.ResourceMemory]; set {
		return res
	}
	limit := m.Spec.Storage.EffectiveSize()
	limit.Add(resource.MustParse(MemoryHeadroom))
	if res.Limits == nil {
		res.Limits = corev1.ResourceList{}
	}
	res.Limits[corev1.ResourceMemory] = limit
	return res
}

// MaxLearners is etcd's --max-learners on releases that have it (3.6 on):
// two new members can then catch up side by side, which halves the time to
// grow a cluster. Learners neither vote nor serve, so it costs no quorum.
const MaxLearners = 2

// optionFlags are etcd's tuning flags, with the operator's defaults where
// the user set nothing.
func optionFlags(m *v1alpha1.EtcdMember) []string {
	o := m.Spec.Options
	if o == nil {
		o = &v1alpha1.EtcdOptions{}
	}
	quota := defaultQuota(m.Spec.Storage.EffectiveSize())
	if o.QuotaBackendBytes != nil {
		quota = *o.QuotaBackendBytes
	}
	mode, retention := DefaultAutoCompactionMode, DefaultAutoCompactionRetention
	if o.AutoCompactionMode != "" {
		mode = string(o.AutoCompactionMode)
		retention = o.AutoCompactionRetention
	} else if o.AutoCompactionRetention != "" {
		retention = o.AutoCompactionRetention
	}
	settings := map[string]string{
		"quota-backend-bytes":  strconv.FormatInt(quota, 10),
		"auto-compaction-mode": mode,
	}
	if retention != "" {
		settings["auto-compaction-retention"] = retention
	}
	if o.SnapshotCount != nil {
		settings["snapshot-count"] = strconv.FormatInt(*o.SnapshotCount, 10)
	}
	// Each member gets its flags as its own release spells them, so that a
	// mixed-version rollout never starts a member on a flag it does not know.
	version := m.Spec.Version
	if version == "" {
		version = v1alpha1.DefaultEtcdVersion
	}
	if v, err := etcdversion.Parse(version); err == nil {
		if v.Minor >= 6 {
			settings["max-learners"] = strconv.Itoa(MaxLearners)
		}
		if flags, err := etcdversion.Flags(v, etcdversion.Settings{Flags: settings}); err == nil {
			return flags
		}
	}
	// A version the policy does not know never gets this far (the API and
	// the rollout refuse it); these flags are spelled alike in every release.
	flags := make([]string, 0, len(settings))
	for _, name := range slices.Sorted(maps.Keys(settings)) {
		flags = append(flags, "--"+name+"="+settings[name])
	}
	return flags
}

func defaultQuota(size resource.Quantity) int64 {
	usable := size.Value() - WALReserveBytes
	if usable <= 0 {
		// Only a member created before storage.size had its minimum can get
		// here; a share of the whole is the best it can be given.
		usable = size.Value()
	}
	return usable / QuotaFraction
}

// defaultAffinity prefers one member per node, unless the user set affinity
// or turned the defaults off. Preferred, not required: a one-node cluster
// must still run all its members.
func defaultAffinity(m *v1alpha1.EtcdMember) *corev1.Affinity {
	if m.Spec.Affinity != nil {
		return m.Spec.Affinity.DeepCopy()
	}
	if m.Spec.DefaultScheduling == v1alpha1.DefaultSchedulingDisabled {
		return nil
	}
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{
				TopologyKey:   hostnameLabel,
				LabelSelector: clusterSelector(m),
			},
		}},
	}}
}

// defaultSpread spreads members over zones softly. ScheduleAnyway means it
// only steers placement where nodes carry the zone label; elsewhere it is inert.
func defaultSpread(m *v1alpha1.EtcdMember) []corev1.TopologySpreadConstraint {
	if len(m.Spec.TopologySpreadConstraints) > 0 {
		out := make([]corev1.TopologySpreadConstraint, 0, len(m.Spec.TopologySpreadConstraints))
		for i := range m.Spec.TopologySpreadConstraints {
			out = append(out, *m.Spec.TopologySpreadConstraints[i].DeepCopy())
		}
		return out
	}
	if m.Spec.DefaultScheduling == v1alpha1.DefaultSchedulingDisabled {
		return nil
	}
	return []corev1.TopologySpreadConstraint{{
		MaxSkew:           1,
		TopologyKey:       zoneLabel,
		WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector:     clusterSelector(m),
	}}
}

func clusterSelector(m *v1alpha1.EtcdMember) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.ClusterLabel: m.Spec.ClusterName}}
}
