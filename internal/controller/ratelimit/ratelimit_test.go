package ratelimit

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// However often a pass fails, its retry comes within MaxRetryDelay.
func TestCapped(t *testing.T) {
	g := NewWithT(t)
	rl := Capped()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "demo"}}
	first := rl.When(req)
	g.Expect(first).To(BeNumerically("<", MaxRetryDelay), "the first retry is quick")
	var last = first
	for range 40 {
		last = rl.When(req)
	}
	g.Expect(last).To(Equal(MaxRetryDelay), "forty failures later, still no longer than the cap")
}
