package refusal

import (
	"context"
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestOf(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	forbidden := apierrors.NewForbidden(pods, "m-0", errors.New("no PriorityClass with name missing was found"))
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "m-0",
		field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations"), "x", "must be no more than 256 KiB")})
	for _, tc := range []struct {
		name    string
		err     error
		refused bool
		message string
	}{
		{name: "nil", err: nil},
		{name: "forbidden", err: forbidden, refused: true, message: forbidden.ErrStatus.Message},
		{name: "wrapped forbidden", err: fmt.Errorf("failed to create Pod ns/m-0: %w", forbidden), refused: true, message: forbidden.ErrStatus.Message},
		{name: "invalid", err: invalid, refused: true, message: invalid.ErrStatus.Message},
		{name: "bad request", err: apierrors.NewBadRequest("nope"), refused: true, message: "nope"},
		{name: "conflict", err: apierrors.NewConflict(pods, "m-0", errors.New("changed"))},
		{name: "already exists", err: apierrors.NewAlreadyExists(pods, "m-0")},
		{name: "timeout", err: apierrors.NewTimeoutError("slow", 1)},
		{name: "plain", err: context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, ok := Of(tc.err)
			if ok != tc.refused || msg != tc.message {
				t.Fatalf("Of(%v) = %q, %v; want %q, %v", tc.err, msg, ok, tc.message, tc.refused)
			}
		})
	}
}
