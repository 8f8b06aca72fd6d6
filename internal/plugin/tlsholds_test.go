package plugin

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

var holdsAt = time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)

// transitioning is cluster demo turning TLS on, at the given point.
func transitioning(tr *v1alpha1.TLSTransitionStatus, annotations map[string]string) *v1alpha1.EtcdCluster {
	c := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: testNS, Annotations: annotations},
		Spec:       v1alpha1.EtcdClusterSpec{TLS: &v1alpha1.TLSSpec{}},
	}
	if tr != nil {
		c.Status.TLS = &v1alpha1.TLSStatus{Transition: tr}
	}
	return c
}

// countPatches makes the world's client count its patches.
func countPatches(w *world) *int {
	n := 0
	w.funcs.Patch = func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
		n++
		return c.Patch(ctx, obj, p, opts...)
	}
	return &n
}

func annotationsOf(g Gomega, env *Env) map[string]string {
	var got v1alpha1.EtcdCluster
	g.Expect(env.Kube.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: "demo"}, &got)).To(Succeed())
	return got.Annotations
}

func TestReleasePlaintext_SetsTheAnnotationAtClientsMaySwitch(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.objs = append(w.objs, transitioning(&v1alpha1.TLSTransitionStatus{
		Phase: "ClientsMaySwitch", Wait: "PlaintextInUse", ClientsHTTPS: true}, nil))
	r := w.run("release-plaintext", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(ContainSubstring("Released plaintext on EtcdCluster ns1/demo"))
	g.Expect(r.out).To(ContainSubstring("serve TLS alone"))

	env := w.env()
	var out bytes.Buffer
	g.Expect(runReleasePlaintext(context.Background(), env, &out, "demo", holdsAt)).To(Succeed())
	g.Expect(annotationsOf(g, env)).To(HaveKeyWithValue(v1alpha1.ReleasePlaintextAnnotation, "2026-12-07T05:00:00Z"))
}

func TestReleasePlaintext_IsIdempotent(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	// Set already, even in a phase that would otherwise be refused: the
	// user's earlier word stands and nothing is written.
	w.objs = append(w.objs, transitioning(&v1alpha1.TLSTransitionStatus{Phase: "RefusingPlaintext", ClientsHTTPS: true, ReleasePlaintextRequest: "yes"},
		map[string]string{v1alpha1.ReleasePlaintextAnnotation: "yes"}))
	patches := countPatches(w)
	r := w.run("release-plaintext", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(ContainSubstring("already has etcd.quorumctl.io/release-plaintext=yes"))
	g.Expect(*patches).To(BeZero())
}

func TestReleasePlaintext_Refusals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster *v1alpha1.EtcdCluster
		want    string
	}{
		{"no spec.tls", &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: testNS}}, "it has no spec.tls"},
		{"no transition", transitioning(nil, nil), "has no TLS transition under way"},
		{"members still adding TLS", transitioning(&v1alpha1.TLSTransitionStatus{Phase: "AddingTLS", Wait: "Restarting"}, nil),
			"not every member serves https yet (phase AddingTLS, waiting for Restarting)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			w := newWorld(t)
			w.objs = append(w.objs, tc.cluster)
			patches := countPatches(w)
			r := w.run("release-plaintext", "demo")
			g.Expect(r.code).To(Equal(ExitError))
			g.Expect(r.err).To(ContainSubstring(tc.want))
			g.Expect(*patches).To(BeZero())

			err := runReleasePlaintext(context.Background(), w.env(), &bytes.Buffer{}, "demo", holdsAt)
			var refused *refusedError
			g.Expect(errors.As(err, &refused)).To(BeTrue(), "%v", err)
		})
	}
}

func TestRotateCA_KeepOldCASetsBothInOnePatch(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.objs = append(w.objs, transitioning(nil, nil))
	patches := countPatches(w)
	r := w.run("rotate-ca", "demo", "--keep-old-ca")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(*patches).To(Equal(1))
	g.Expect(r.out).To(ContainSubstring("held before the old CA is dropped"))
	g.Expect(r.out).To(ContainSubstring("kubectl etcd release-old-ca demo -n ns1"))

	env := w.env()
	g.Expect(runRotateCA(context.Background(), env, &bytes.Buffer{}, "demo", true, holdsAt)).To(Succeed())
	g.Expect(annotationsOf(g, env)).To(And(
		HaveKeyWithValue(v1alpha1.RotateCAAnnotation, "2026-12-07T05:00:00Z"),
		HaveKeyWithValue(v1alpha1.KeepOldCAAnnotation, "kubectl-etcd")))
}

func TestRotateCA_KeepOldCAKeepsAnExistingHoldsValue(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.objs = append(w.objs, transitioning(nil, map[string]string{v1alpha1.KeepOldCAAnnotation: "apiserver"}))
	env := w.env()
	g.Expect(runRotateCA(context.Background(), env, &bytes.Buffer{}, "demo", true, holdsAt)).To(Succeed())
	g.Expect(annotationsOf(g, env)).To(HaveKeyWithValue(v1alpha1.KeepOldCAAnnotation, "apiserver"))
}

func TestRotateCA_WithoutTheFlagNamesAHoldLeftInPlace(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.objs = append(w.objs, transitioning(nil, map[string]string{v1alpha1.KeepOldCAAnnotation: "apiserver"}))
	r := w.run("rotate-ca", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(ContainSubstring("etcd.quorumctl.io/keep-old-ca=apiserver is set"))

	w = newWorld(t)
	w.objs = append(w.objs, transitioning(nil, nil))
	r = w.run("rotate-ca", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).NotTo(ContainSubstring("keep-old-ca"))
}

func TestRotateCA_KeepOldCARefusedWithoutOperatorCAs(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.cluster("demo")
	patches := countPatches(w)
	r := w.run("rotate-ca", "demo", "--keep-old-ca")
	g.Expect(r.code).To(Equal(ExitError))
	g.Expect(r.err).To(ContainSubstring("has no CA the operator keeps"))
	g.Expect(*patches).To(BeZero())
}

func TestReleaseOldCA_RemovesTheHold(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	c := transitioning(nil, map[string]string{v1alpha1.KeepOldCAAnnotation: "apiserver", v1alpha1.RotateCAAnnotation: "r1"})
	c.Status.TLS = &v1alpha1.TLSStatus{Client: &v1alpha1.TLSSectionStatus{Rotation: v1alpha1.CARotationSwitchingCertificates}}
	w.objs = append(w.objs, c)
	r := w.run("release-old-ca", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(ContainSubstring("Removed etcd.quorumctl.io/keep-old-ca=apiserver from EtcdCluster ns1/demo"))
	g.Expect(r.out).To(ContainSubstring("members restart one at a time to trust the new CA alone"))

	env := w.env()
	g.Expect(runReleaseOldCA(context.Background(), env, &bytes.Buffer{}, "demo")).To(Succeed())
	got := annotationsOf(g, env)
	g.Expect(got).NotTo(HaveKey(v1alpha1.KeepOldCAAnnotation))
	g.Expect(got).To(HaveKeyWithValue(v1alpha1.RotateCAAnnotation, "r1"), "only the hold goes")
}

func TestReleaseOldCA_WithoutARotationSaysSo(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.objs = append(w.objs, transitioning(nil, map[string]string{v1alpha1.KeepOldCAAnnotation: "x"}))
	r := w.run("release-old-ca", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(ContainSubstring("No CA rotation is under way"))
}

func TestReleaseOldCA_IsIdempotent(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.objs = append(w.objs, transitioning(nil, nil))
	patches := countPatches(w)
	r := w.run("release-old-ca", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(ContainSubstring("has no etcd.quorumctl.io/keep-old-ca annotation"))
	g.Expect(*patches).To(BeZero())
}

func TestReleaseCommands_NeedOneCluster(t *testing.T) {
	g := NewWithT(t)
	for _, cmd := range []string{"release-plaintext", "release-old-ca"} {
		r := newWorld(t).run(cmd)
		g.Expect(r.code).To(Equal(ExitUsage), cmd)
		g.Expect(r.err).To(ContainSubstring(cmd+" takes CLUSTER"), cmd)
	}
}

func TestStatusShowsTheTLSTransition(t *testing.T) {
	g := NewWithT(t)
	w := tlsWorld(t)
	w.objs[0].(*v1alpha1.EtcdCluster).Status.TLS = &v1alpha1.TLSStatus{Transition: &v1alpha1.TLSTransitionStatus{
		Phase: "ClientsMaySwitch", Wait: "PlaintextInUse", ClientsHTTPS: true}}
	r := w.run("status", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(ContainSubstring("\nTLS transition: phase ClientsMaySwitch, waiting: PlaintextInUse (move clients to https, then: kubectl etcd release-plaintext demo)\nNAME "))

	r = w.run("status", "demo", "-o", "json")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(ContainSubstring(`"tlsTransition": {`))
	g.Expect(r.out).To(ContainSubstring(`"phase": "ClientsMaySwitch"`))
	g.Expect(r.out).To(ContainSubstring(`"wait": "PlaintextInUse"`))
}

func TestStatusWithoutTransitionPrintsNoLine(t *testing.T) {
	g := NewWithT(t)
	w := healthyWorld(t)
	r := w.run("status", "demo", "-o", "json")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).NotTo(ContainSubstring("tlsTransition"))
	r = w.run("status", "demo")
	g.Expect(r.out).NotTo(ContainSubstring("TLS transition"))
}

func TestTransitionLine(t *testing.T) {
	g := NewWithT(t)
	g.Expect(transitionLine("demo", &TLSTransition{Phase: "AddingTLS"})).To(Equal("TLS transition: phase AddingTLS"))
	g.Expect(transitionLine("demo", &TLSTransition{Phase: "RefusingPlaintext", Wait: "Paused"})).To(Equal("TLS transition: phase RefusingPlaintext, waiting: Paused (spec.rollout.paused)"))
}
