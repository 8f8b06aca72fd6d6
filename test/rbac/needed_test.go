package rbac_test

import (
	"strings"
	"sync"
	"testing"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/test/rbac"
)

const (
	root      = "../.."
	release   = "etcd-operator"
	namespace = "etcd-operator-system"
)

// declared resolves calls whose object has an interface type, by the
// function they are in. A new one fails the tests until it is added here.
var declared = map[string][]rbac.Permission{
	// Gets the member's Secret and trust-bundle ConfigMaps, from the cache.
	"etcdmember.(*Reconciler).missingTLSMaterial": {
		{Resource: "secrets", Verb: "get"}, {Resource: "secrets", Verb: "list"}, {Resource: "secrets", Verb: "watch"},
		{Resource: "configmaps", Verb: "get"}, {Resource: "configmaps", Verb: "list"}, {Resource: "configmaps", Verb: "watch"},
	},
	// Applies one concern's fields of an EtcdMember's status.
	"memberstatus.Apply": {{Group: v1alpha1.GroupVersion.Group, Resource: "etcdmembers/status", Verb: "patch"}},
}

// byDefault is what every authenticated user may do (Kubernetes'
// system:basic-user ClusterRole), so the chart need not grant it.
var byDefault = map[rbac.Permission]bool{
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews", Verb: "create"}: true,
}

func isLeaderElection(role string) bool { return strings.HasSuffix(role, "-leader-election") }

var (
	neededOnce  sync.Once
	neededPerms []rbac.Permission
	neededWhere map[rbac.Permission]string
	neededErr   error
)

// needed is what the manager's code needs, with where each is first needed;
// the analysis loads the packages once for every test.
func needed(t *testing.T) ([]rbac.Permission, map[rbac.Permission]string) {
	t.Helper()
	neededOnce.Do(func() {
		s := runtime.NewScheme()
		for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, cmapi.AddToScheme} {
			if err := add(s); err != nil {
				neededErr = err
				return
			}
		}
		uses, unresolved, err := rbac.Find(root, "./cmd/manager", s)
		if err != nil {
			neededErr = err
			return
		}
		neededWhere = map[rbac.Permission]string{}
		record := func(p rbac.Permission, where string) {
			if byDefault[p] {
				return
			}
			if _, ok := neededWhere[p]; !ok {
				neededWhere[p] = where
				neededPerms = append(neededPerms, p)
			}
		}
		for _, u := range uses {
			record(u.Permission, u.Where)
		}
		var unknown []string
		for _, u := range unresolved {
			perms, ok := declared[u.Func]
			if !ok {
				unknown = append(unknown, u.Func+": "+u.Call+" at "+u.Where)
				continue
			}
			for _, p := range perms {
				record(p, u.Where+" (declared)")
			}
		}
		if len(unknown) > 0 {
			neededErr = &unresolvedError{unknown}
		}
	})
	if neededErr != nil {
		t.Fatal(neededErr)
	}
	return neededPerms, neededWhere
}

type unresolvedError struct{ calls []string }

func (e *unresolvedError) Error() string {
	return "calls whose object's kind the analysis cannot tell; add their function to declared:" + rbac.Lines(e.calls)
}
