package etcdmember

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// withAuth turns spec.auth on for the fixture's cluster, with its
// generated root Secret, and etcd's authentication on with that password.
func (f *fixture) withAuth() {
	ctx := context.Background()
	cl := &v1alpha1.EtcdCluster{}
	f.g.Expect(f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "demo"}, cl)).To(Succeed())
	cl.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true}
	f.g.Expect(f.c.Update(ctx, cl)).To(Succeed())
	f.g.Expect(f.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "demo-etcd-root", Namespace: ns},
		Data: map[string][]byte{"password": []byte("roots-pw")}})).To(Succeed())
	f.etcd.SetAuth(map[string]string{"root": "roots-pw"})
}

func (f *fixture) dials() []etcdfake.Call {
	var out []etcdfake.Call
	for _, c := range f.etcd.Calls {
		if c.Op == etcd.OpDial {
			out = append(out, c)
		}
	}
	return out
}

// With a password, the version check of one member dials the others too,
// so that a learner's refusal to exchange the password for a token does
// not fail it; the Status still goes to the member.
func TestAuth_VersionCheckDialsTheOthersForTheToken(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b")
	f.withAuth()
	cl := &v1alpha1.EtcdCluster{}
	f.g.Expect(f.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "demo"}, cl)).To(Succeed())
	v := f.r.observeVersion(context.Background(), cl, f.member("demo-b"))
	f.g.Expect(v).To(Equal(etcdfake.Version))
	dials := f.dials()
	f.g.Expect(dials).To(HaveLen(1))
	f.g.Expect(dials[0].Endpoints).To(Equal([]string{
		v1alpha1.ClientURL("demo-b", "demo", ns, domain), v1alpha1.ClientURL("demo-a", "demo", ns, domain)}))
	f.g.Expect(dials[0].Dial.Credentials).To(Equal(etcd.Credentials{User: "root", Password: "roots-pw"}))
	var status []etcdfake.Call
	for _, c := range f.etcd.Calls {
		if c.Op == etcd.OpStatus {
			status = append(status, c)
		}
	}
	f.g.Expect(status).To(HaveLen(1))
	f.g.Expect(status[0].Endpoint).To(Equal(v1alpha1.ClientURL("demo-b", "demo", ns, domain)))
}

// The finalizer removes a member through etcd as root.
func TestAuth_FinalizerRemovesAsRoot(t *testing.T) {
	f := newFixture(t, false, "demo-a", "demo-b", "demo-c")
	f.withAuth()
	victim := f.etcd.Members()[2]
	f.deleteAndReconcile("demo-c")
	f.g.Expect(f.etcd.Removed).To(Equal([]uint64{victim.ID}))
	f.g.Expect(f.gone("demo-c")).To(BeTrue())
}
