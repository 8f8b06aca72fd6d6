package plugin

import (
	"context"
	"io"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

func TestRotateCA_SetsTheAnnotation(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.objs = append(w.objs, &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: testNS},
		Spec: v1alpha1.EtcdClusterSpec{TLS: &v1alpha1.TLSSpec{}}})
	r := w.run("rotate-ca", "demo")
	g.Expect(r.code).To(Equal(ExitOK), r.err)
	g.Expect(r.out).To(ContainSubstring("Asked the operator to rotate the CAs of EtcdCluster ns1/demo"))

	env := w.env()
	at := time.Date(2026, 12, 6, 22, 0, 0, 0, time.UTC)
	g.Expect(runRotateCA(context.Background(), env, io.Discard, "demo", false, at)).To(Succeed())
	var got v1alpha1.EtcdCluster
	g.Expect(env.Kube.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: "demo"}, &got)).To(Succeed())
	g.Expect(got.Annotations).To(HaveKeyWithValue(v1alpha1.RotateCAAnnotation, "2026-12-06T22:00:00Z"), "a new value: a new request")
}

func TestRotateCA_RefusesAClusterWithoutOperatorCAs(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.cluster("plain")
	r := w.run("rotate-ca", "plain")
	g.Expect(r.code).NotTo(Equal(ExitOK))
	g.Expect(r.err).To(ContainSubstring("has no CA the operator keeps"))
}
