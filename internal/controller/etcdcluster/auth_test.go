package etcdcluster

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

func (h *harness) enableAuth(secret string) {
	h.t.Helper()
	cl := h.cluster()
	cl.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true, RootSecretName: secret}
	cl.Generation++
	h.g.Expect(h.c.Update(context.Background(), cl)).To(Succeed())
}

func (h *harness) rootSecret(name string) *corev1.Secret {
	h.t.Helper()
	s := &corev1.Secret{}
	h.g.Expect(h.c.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: name}, s)).To(Succeed())
	return s
}

// Turning auth on for a running cluster: the operator generates root's
// password into a Secret the cluster owns, turns authentication on with
// it, reports Ready=False/EnablingAuth until then and status.auth after;
// the next passes reach etcd as root with that password, and no Event or
// condition carries it.
func TestAuthEnabledOnARunningCluster(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "m1", "m2", "m3")
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))

	h.enableAuth("")
	h.reconcile()
	secret := h.rootSecret(v1alpha1.GeneratedRootSecretName(testName))
	h.g.Expect(metav1.IsControlledBy(secret, h.cluster())).To(BeTrue())
	password := string(secret.Data[v1alpha1.RootPasswordKey])
	h.g.Expect(len(password)).To(BeNumerically(">=", 40))
	h.g.Expect(h.etcd.AuthOn()).To(BeFalse(), "the pass that created the Secret waits for the next")
	ready := h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	h.g.Expect(ready.Reason).To(Equal(v1alpha1.EnablingAuthReason))

	h.reconcile()
	h.g.Expect(h.etcd.AuthOn()).To(BeTrue())
	h.g.Expect(h.etcd.AuthUsers()).To(Equal(map[string]bool{"root": true}))
	h.g.Expect(h.cluster().Status.Auth).To(Equal(&v1alpha1.AuthStatus{Enabled: true, RootSecretName: "demo-etcd-root"}))
	h.g.Expect(h.rootSecret(v1alpha1.GeneratedRootSecretName(testName)).Data).To(Equal(secret.Data), "never rewritten")

	h.reconcile()
	ready = h.condition(v1alpha1.ReadyCondition)
	h.g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "%s: %s", ready.Reason, ready.Message)
	h.g.Expect(h.etcd.EnabledAuth).To(HaveLen(1), "enabled once")
	var dials []etcdfake.Call
	for _, c := range h.etcd.Calls {
		if c.Op == etcd.OpDial {
			dials = append(dials, c)
		}
	}
	h.g.Expect(dials[len(dials)-1].Dial.Credentials).To(Equal(etcd.Credentials{User: "root", Password: password}))

	events := strings.Join(h.drainEvents(), "\n")
	h.g.Expect(events).To(ContainSubstring("AuthEnabled"))
	for _, c := range h.cluster().Status.Conditions {
		h.g.Expect(c.Message).NotTo(ContainSubstring(password))
	}
	h.g.Expect(events).NotTo(ContainSubstring(password))
}

// Partial progress: etcd has authentication on already (an earlier
// operator turned it on and was restarted before writing status); the
// operator only records it.
func TestAuthAlreadyOnIsRecorded(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "m1", "m2", "m3")
	h.g.Expect(h.c.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: testNS},
		Data:       map[string][]byte{"password": []byte("pw")},
	})).To(Succeed())
	h.etcd.SetAuth(map[string]string{"root": "pw"})
	h.enableAuth("mine")
	h.reconcile()
	h.g.Expect(h.etcd.EnabledAuth).To(BeEmpty())
	h.g.Expect(h.cluster().Status.Auth).To(Equal(&v1alpha1.AuthStatus{Enabled: true, RootSecretName: "mine"}))
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
}

// A wrong password stalls the cluster with AuthFailed naming the Secret,
// changes nothing in etcd, and clears once the Secret is right.
func TestAuthWrongPasswordIsReported(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "m1", "m2", "m3")
	wrong := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: testNS},
		Data: map[string][]byte{"password": []byte("not-roots")}}
	h.g.Expect(h.c.Create(context.Background(), wrong)).To(Succeed())
	h.etcd.SetAuth(map[string]string{"root": "roots"})
	h.enableAuth("mine")
	h.reconcile()
	for _, typ := range []string{v1alpha1.ReadyCondition, v1alpha1.StalledCondition} {
		c := h.condition(typ)
		h.g.Expect(c.Reason).To(Equal(v1alpha1.AuthFailedReason), typ)
		h.g.Expect(c.Message).To(ContainSubstring("etcd refused root's password from Secret ns/mine"))
		h.g.Expect(c.Message).NotTo(ContainSubstring("not-roots"))
	}
	h.g.Expect(h.condition(v1alpha1.StalledCondition).Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(h.etcd.Removed).To(BeEmpty())
	h.g.Expect(h.etcd.AddedLearners).To(BeEmpty())

	wrong.Data["password"] = []byte("roots")
	h.g.Expect(h.c.Update(context.Background(), wrong)).To(Succeed())
	h.reconcile()
	h.reconcile()
	h.g.Expect(h.condition(v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
}

// A Secret without a password is named in AuthSecretInvalid, before etcd
// is asked to turn anything on.
func TestAuthSecretWithoutPassword(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "m1", "m2", "m3")
	h.enableAuth("missing")
	h.reconcile()
	c := h.condition(v1alpha1.StalledCondition)
	h.g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	h.g.Expect(c.Reason).To(Equal(v1alpha1.AuthSecretInvalidReason))
	h.g.Expect(c.Message).To(ContainSubstring("Secret ns/missing with root's password does not exist"))
	h.g.Expect(h.etcd.AuthOn()).To(BeFalse())
}

// etcd with authentication on while spec.auth does not ask for it (a
// cluster restored from a snapshot of one with it on) is AuthRequired,
// and no member is judged broken for it.
func TestAuthRequiredWithoutSpecAuth(t *testing.T) {
	h := newHarness(t)
	h.formed(3, "m1", "m2", "m3")
	h.etcd.SetAuth(map[string]string{"root": "roots"})
	h.reconcile()
	c := h.condition(v1alpha1.StalledCondition)
	h.g.Expect(c.Reason).To(Equal(v1alpha1.AuthRequiredReason))
	h.g.Expect(c.Message).To(ContainSubstring("set spec.auth.enabled"))
	h.g.Expect(h.condition(v1alpha1.QuorumLostCondition).Status).To(Equal(metav1.ConditionFalse))
	h.g.Expect(h.etcd.Removed).To(BeEmpty())
}
