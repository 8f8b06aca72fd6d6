package etcdcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/component/pod"
	"github.com/quorumctl/etcd-operator/internal/component/pvc"
)

// storageClass creates a StorageClass that does or does not allow expansion.
func (h *harness) storageClass(name string, expand bool) {
	h.t.Helper()
	h.g.Expect(h.c.Create(context.Background(), &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: name},
		Provisioner:          "example.com/" + name,
		AllowVolumeExpansion: ptr.To(expand),
	})).To(Succeed())
}

// boundVolume creates a member's bound claim of the given class and size,
// as the member controller and the provisioner leave it.
func (h *harness) boundVolume(member, class, size string) {
	h.t.Helper()
	q := resource.MustParse(size)
	h.g.Expect(h.c.Create(context.Background(), &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DataVolumeClaimName(member), Namespace: testNS},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(class),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: q}},
	})).To(Succeed())
}

func (h *harness) volume(member string) *corev1.PersistentVolumeClaim {
	h.t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	h.g.Expect(h.c.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: v1alpha1.DataVolumeClaimName(member)}, pvc)).To(Succeed())
	return pvc
}

// grown plays the resizer and the kubelet growing a claim to its request.
func (h *harness) grown(member string) {
	h.t.Helper()
	pvc := h.volume(member)
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]}
	h.g.Expect(h.c.Status().Update(context.Background(), pvc)).To(Succeed())
}

// growClaims plays the member controller: each member's claim grows to the
// size its spec asks (spec.volumeSize), with the member controller's own
// code. The cluster controller never writes a claim.
func (h *harness) growClaims() {
	h.t.Helper()
	for _, m := range h.members() {
		claim := &corev1.PersistentVolumeClaim{}
		err := h.c.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: v1alpha1.DataVolumeClaimName(m.Name)}, claim)
		if apierrors.IsNotFound(err) {
			continue
		}
		h.g.Expect(err).NotTo(HaveOccurred())
		_, _, err = pvc.Grow(context.Background(), h.c, &m, claim)
		h.g.Expect(err).NotTo(HaveOccurred())
	}
}

// storageCluster is a formed 3-member cluster on 256Mi volumes of class.
func storageCluster(t *testing.T, class string, expand bool) *harness {
	h := newHarness(t)
	h.formed(3, "demo-a", "demo-b", "demo-c")
	small := v1alpha1.StorageSpec{Size: ptrQuantity("256Mi"), StorageClassName: ptr.To(class)}
	cl := h.cluster()
	cl.Spec.Storage = small
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
	cl = h.cluster()
	cl.Status.Observed.Storage = small
	h.g.Expect(h.c.Status().Update(context.Background(), cl)).To(Succeed())
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		m := h.member(n)
		m.Spec.Storage = small
		h.g.Expect(h.c.Update(context.Background(), m)).To(Succeed())
		h.boundVolume(n, class, "256Mi")
	}
	h.storageClass(class, expand)
	return h
}

// rollToReady runs passes, playing the member controller, the finalizer and
// new members' Pods, until the cluster is Ready, and checks that three
// healthy voters are there on every pass.
func (h *harness) rollToReady(between func()) {
	h.t.Helper()
	h.withFinalizers()
	for i := 0; i < 80; i++ {
		h.reconcile()
		h.growClaims()
		h.runFinalizers()
		h.collectGarbage()
		h.g.Expect(h.healthyVoters()).To(BeNumerically(">=", 3), "pass %d: never fewer than three healthy voters", i)
		for _, m := range h.members() {
			if m.Status.Role == v1alpha1.MemberRoleVoter && h.hasPod(m.Name) && h.pod(m.Name).Labels[v1alpha1.RoleLabel] == "" {
				h.labelVoter(m.Name)
			}
			if m.Spec.InitialCluster != "" && !h.hasPod(m.Name) {
				if em, ok := h.etcdMember(m.Spec.PeerURL); ok && em.Name == "" {
					h.startLearner(m.Name)
				}
			}
		}
		if between != nil {
			between()
		}
		if h.condition(v1alpha1.ReadyCondition).Status == metav1.ConditionTrue {
			return
		}
	}
	h.t.Fatalf("not Ready: %s", h.condition(v1alpha1.ReadyCondition).Message)
}

func TestStorage_GrowsByReplacementWhereTheClassCannotExpand(t *testing.T) {
	h := storageCluster(t, "local-path", false)
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Storage.Size = ptrQuantity("1Gi") })
	h.reconcile()
	h.growClaims()
	h.g.Expect(h.member("demo-b").Spec.VolumeSize).To(BeNil())
	h.g.Expect(h.volume("demo-b").Spec.Resources.Requests.Storage().String()).To(Equal("256Mi"), "a volume that cannot grow is never asked to")
	h.rollToReady(nil)
	members := h.members()
	h.g.Expect(members).To(HaveLen(3))
	for _, m := range members {
		h.g.Expect(m.Spec.Replaces).To(BeElementOf("demo-a", "demo-b", "demo-c"), "each is a replacement")
		h.g.Expect(m.Spec.Storage.Size.String()).To(Equal("1Gi"))
		h.g.Expect(pod.QuotaBackendBytes(m.Spec.MemberTemplate)).To(BeNumerically(">", pod.QuotaBackendBytes(v1alpha1.MemberTemplate{
			Storage: v1alpha1.StorageSpec{Size: ptrQuantity("256Mi")}})), "the default quota follows the size")
	}
}

func TestStorage_MovesToAnotherClassByReplacement(t *testing.T) {
	h := storageCluster(t, "local-path", true)
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Storage.StorageClassName = ptr.To("local-path-b") })
	h.reconcile()
	var replacing string
	for _, e := range h.drainEvents() {
		if strings.Contains(e, "MemberUpdating") {
			replacing = e
		}
	}
	h.g.Expect(replacing).To(ContainSubstring("Replacing member demo-b by "), "a class change is a replacement, even where the old class expands")
	h.rollToReady(nil)
	for _, m := range h.members() {
		h.g.Expect(*m.Spec.Storage.StorageClassName).To(Equal("local-path-b"))
		h.g.Expect(m.Spec.Replaces).NotTo(BeEmpty())
	}
}

func TestStorage_GrowsOnlineWhereTheClassExpands(t *testing.T) {
	h := storageCluster(t, "expandable", true)
	b, _ := h.etcdMember(peerURL("demo-b"))
	h.etcd.SetLeader(b.ID)
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Storage.Size = ptrQuantity("1Gi") })

	h.reconcile()
	h.g.Expect(h.member("demo-a").Spec.VolumeSize.String()).To(Equal("1Gi"), "the cluster controller asks in the member's spec")
	h.g.Expect(h.volume("demo-a").Spec.Resources.Requests.Storage().String()).To(Equal("256Mi"), "and leaves the claim to the member controller")
	h.growClaims()
	h.g.Expect(h.volume("demo-a").Spec.Resources.Requests.Storage().String()).To(Equal("1Gi"), "the first follower's volume is asked to grow")
	h.g.Expect(h.member("demo-a").Status.Maintenance).To(HaveField("Kind", v1alpha1.MemberMaintenanceExpandVolume))
	h.g.Expect(h.member("demo-a").Spec.Storage.Size.String()).To(Equal("256Mi"), "the member keeps running on it meanwhile")
	h.g.Expect(h.drainEvents()).To(ContainElement(ContainSubstring("VolumeExpanding Growing the volume of member demo-a from 256Mi to 1Gi online")))

	h.reconcile()
	h.growClaims()
	h.g.Expect(h.member("demo-c").Spec.VolumeSize).To(BeNil())
	h.g.Expect(h.volume("demo-c").Spec.Resources.Requests.Storage().String()).To(Equal("256Mi"), "one volume at a time")
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Message).To(ContainSubstring("waiting for the volume of demo-a to grow"))

	var order []string
	h.rollToReady(func() {
		for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
			if !h.exists(n) {
				continue
			}
			if pvc := h.volume(n); pvc.Spec.Resources.Requests.Storage().Cmp(*pvc.Status.Capacity.Storage()) > 0 {
				h.grown(n)
				order = append(order, n)
			}
		}
	})
	h.g.Expect(order).To(Equal([]string{"demo-a", "demo-c", "demo-b"}), "followers first, the leader last")
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		m := h.member(n)
		h.g.Expect(m.Spec.Storage.Size.String()).To(Equal("1Gi"), "%s runs its template on the grown volume: the same member", n)
		h.g.Expect(m.Status.Maintenance).To(BeNil())
		h.g.Expect(h.volume(n).Status.Capacity.Storage().String()).To(Equal("1Gi"))
	}
	h.g.Expect(h.etcd.AddedLearners).To(BeEmpty(), "no member was replaced")
}

func TestStorage_AVolumeThatDoesNotGrowIsReplaced(t *testing.T) {
	h := storageCluster(t, "claims-to-expand", true)
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Storage.Size = ptrQuantity("1Gi") })
	h.reconcile()
	h.growClaims()
	h.g.Expect(h.volume("demo-b").Spec.Resources.Requests.Storage().String()).To(Equal("1Gi"))
	h.reconcile()
	h.g.Expect(h.members()).To(HaveLen(3), "it waits for the volume a while")

	h.now = h.now.Add(volumeExpansionTimeout)
	h.reconcile()
	var replaced bool
	for _, e := range h.drainEvents() {
		replaced = replaced || strings.Contains(e, "VolumeExpansionFailed Replacing member demo-b instead of growing its volume: its volume did not grow within 10m0s")
	}
	h.g.Expect(replaced).To(BeTrue())
	h.g.Expect(h.replacementOf("demo-b")).NotTo(BeNil())
}

func TestStorage_AVolumeKubernetesCannotGrowIsReplaced(t *testing.T) {
	h := storageCluster(t, "claims-to-expand", true)
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Storage.Size = ptrQuantity("1Gi") })
	h.reconcile()
	h.growClaims()
	pvc := h.volume("demo-b")
	pvc.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{
		corev1.ResourceStorage: corev1.PersistentVolumeClaimControllerResizeInfeasible}
	h.g.Expect(h.c.Status().Update(context.Background(), pvc)).To(Succeed())
	h.now = h.now.Add(time.Second)
	h.reconcile()
	h.g.Expect(h.replacementOf("demo-b")).NotTo(BeNil())
	h.g.Expect(h.drainEvents()).To(ContainElement(ContainSubstring("its volume cannot grow (ControllerResizeInfeasible)")))
}

// The cluster controller asks for a volume to grow in the member's spec and
// never writes the claim; until the member controller has grown the claim,
// the rollout waits on it, and asks nothing more.
func TestStorage_TheClaimIsTheMemberControllers(t *testing.T) {
	h := storageCluster(t, "expandable", true)
	b, _ := h.etcdMember(peerURL("demo-b"))
	h.etcd.SetLeader(b.ID)
	claims := map[string]string{}
	for _, n := range []string{"demo-a", "demo-b", "demo-c"} {
		claims[n] = h.volume(n).ResourceVersion
	}
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Storage.Size = ptrQuantity("1Gi") })

	h.reconcile()
	h.g.Expect(h.member("demo-a").Spec.VolumeSize.String()).To(Equal("1Gi"))
	h.g.Expect(h.drainEvents()).To(ContainElement(ContainSubstring("VolumeExpanding Growing the volume of member demo-a from 256Mi to 1Gi online")))
	for range 3 {
		h.reconcile()
	}
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Message).To(ContainSubstring("waiting for the volume of demo-a to grow"))
	h.g.Expect(h.drainEvents()).NotTo(ContainElement(ContainSubstring("VolumeExpanding")), "asked once")
	for _, n := range []string{"demo-b", "demo-c"} {
		h.g.Expect(h.member(n).Spec.VolumeSize).To(BeNil(), "one volume at a time")
	}
	for n, rv := range claims {
		h.g.Expect(h.volume(n).ResourceVersion).To(Equal(rv), "the cluster controller wrote the claim of %s", n)
	}
}

// A claim an earlier operator asked to grow itself, before members said
// how large their volume is to be, is waited on like one the member
// controller grew.
func TestStorage_AClaimAskedToGrowBeforeTheUpgradeIsWaitedOn(t *testing.T) {
	h := storageCluster(t, "expandable", true)
	b, _ := h.etcdMember(peerURL("demo-b"))
	h.etcd.SetLeader(b.ID)
	claim := h.volume("demo-a")
	claim.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1Gi")
	h.g.Expect(h.c.Update(context.Background(), claim)).To(Succeed())
	h.editTemplate(func(t *v1alpha1.MemberTemplate) { t.Storage.Size = ptrQuantity("1Gi") })

	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ProgressingCondition).Message).To(ContainSubstring("waiting for the volume of demo-a to grow"))
	h.g.Expect(h.member("demo-a").Spec.VolumeSize).To(BeNil())
	h.g.Expect(h.drainEvents()).NotTo(ContainElement(ContainSubstring("VolumeExpanding")))
}
