package memberstatus

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// Before the split, both controllers wrote status with merge patches under
// one manager (the binary's name, operation Update). An apply that leaves a
// field out removes it only if no other manager owns it, so a field that
// old manager set (fenced, say) could never be cleared by its concern: the
// old entry would keep it. upgrade hands each field of every Update entry of
// the status subresource to the concern that owns the field, the way
// client-go's csaupgrade hands a manager's fields to one applier, but split
// by field, which csaupgrade cannot do. The split writes managedFields
// themselves, guarded by the resourceVersion it read.

// upgrade rewrites m's managedFields when they hold an Update entry of the
// status subresource. Nothing is sent otherwise; a read that strips
// managedFields sends nothing either, and the concerns' applies then share
// the fields with the old manager until a read that has them.
func upgrade(ctx context.Context, c client.Client, m *v1alpha1.EtcdMember) error {
	entries, changed, err := split(m.ManagedFields)
	if err != nil || !changed {
		return err
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "replace", "path": "/metadata/managedFields", "value": entries},
		// replace, not test: the API server then refuses a stale read with
		// a Conflict, as for any write, rather than as an invalid patch.
		{"op": "replace", "path": "/metadata/resourceVersion", "value": m.ResourceVersion},
	})
	if err != nil {
		return err
	}
	// A copy: the caller's changes to m are what it is about to apply. The
	// patch was guarded by m's resourceVersion, so m is still the member as
	// it was read, at the version the patch made.
	got := m.DeepCopy()
	if err := c.Patch(ctx, got, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("failed to hand the status fields of EtcdMember %s to their field managers: %w", m.Name, err)
	}
	m.ResourceVersion, m.ManagedFields = got.ResourceVersion, got.ManagedFields
	return nil
}

// split moves the fields of every Update entry of the status subresource
// into an Apply entry of the concern that owns each field, merged with the
// concern's own entry if it has one. Entries of other subresources and
// appliers are kept as they are.
func split(entries []metav1.ManagedFieldsEntry) ([]metav1.ManagedFieldsEntry, bool, error) {
	var out []metav1.ManagedFieldsEntry
	moved := map[string]*fieldpath.Set{}
	legacy := map[string]metav1.ManagedFieldsEntry{}
	for _, e := range entries {
		if e.Subresource != "status" || e.Operation != metav1.ManagedFieldsOperationUpdate {
			out = append(out, e)
			continue
		}
		set, err := decode(e)
		if err != nil {
			return nil, false, fmt.Errorf("managedFields entry of %s: %w", e.Manager, err)
		}
		for _, cn := range Concerns {
			part := fieldsUnder(set.FilterIncludeMatches(cn.matcher()))
			if part.Empty() {
				continue
			}
			if moved[cn.Manager] == nil {
				moved[cn.Manager] = &fieldpath.Set{}
				legacy[cn.Manager] = e
			}
			moved[cn.Manager] = moved[cn.Manager].Union(part)
		}
	}
	if len(out) == len(entries) {
		return entries, false, nil
	}
	for _, cn := range Concerns {
		set := moved[cn.Manager]
		if set == nil {
			continue
		}
		i := slices.IndexFunc(out, func(e metav1.ManagedFieldsEntry) bool {
			return e.Manager == cn.Manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "status"
		})
		if i < 0 {
			e := legacy[cn.Manager]
			out = append(out, metav1.ManagedFieldsEntry{Manager: cn.Manager, Operation: metav1.ManagedFieldsOperationApply,
				APIVersion: e.APIVersion, Time: e.Time, FieldsType: "FieldsV1", Subresource: "status"})
			i = len(out) - 1
		} else {
			own, err := decode(out[i])
			if err != nil {
				return nil, false, fmt.Errorf("managedFields entry of %s: %w", cn.Manager, err)
			}
			set = set.Union(&own)
		}
		raw, err := set.ToJSON()
		if err != nil {
			return nil, false, err
		}
		out[i].FieldsV1 = metav1.NewFieldsV1(string(raw))
	}
	return out, true, nil
}

// fieldsUnder keeps the paths below a status field: a filtered set can
// hold the status object itself, which is nobody's concern, and empty
// nodes that would encode as fields.
func fieldsUnder(s *fieldpath.Set) *fieldpath.Set {
	out := &fieldpath.Set{}
	for p := range s.All() {
		if len(p) >= 2 {
			out.Insert(p)
		}
	}
	return out
}

func decode(e metav1.ManagedFieldsEntry) (fieldpath.Set, error) {
	var set fieldpath.Set
	if e.FieldsV1 == nil {
		return set, nil
	}
	err := set.FromJSON(e.FieldsV1.GetRawReader())
	return set, err
}

// matcher matches the concern's status fields and everything below them.
func (c Concern) matcher() *fieldpath.SetMatcher {
	var m *fieldpath.SetMatcher
	for _, f := range c.Fields() {
		next := fieldpath.MakePrefixMatcherOrDie("status", f)
		if m == nil {
			m = next
			continue
		}
		m = m.Merge(next)
	}
	return m
}

// Fields are the JSON names of the concern's status fields.
func (c Concern) Fields() []string {
	all := EveryField()
	part := c.Project(&all)
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&part)
	if err != nil {
		panic(err) // a status always encodes
	}
	names := make([]string, 0, len(u))
	for k := range u {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// EveryField is a status with every field set, so that a projection shows
// which fields a concern keeps.
func EveryField() v1alpha1.EtcdMemberStatus {
	t := metav1.Now()
	return v1alpha1.EtcdMemberStatus{
		ObservedGeneration: 1, Conditions: []metav1.Condition{{Type: v1alpha1.MemberReadyCondition}},
		MemberID: "1", Role: v1alpha1.MemberRoleVoter, PodName: "p", PodUID: "u", Version: "v",
		RolledAt: &t, RestartApproved: "h", NodeName: "n", FirstReadyTime: &t, Fenced: "f",
		ForceNewCluster: true, Maintenance: &v1alpha1.MemberMaintenance{Kind: v1alpha1.MemberMaintenanceDefragment},
		LastDefragTime: &t,
	}
}
