package store

import (
	"context"
	"errors"
	"testing"

	"github.com/quorumctl/etcd-operator/internal/backup"
)

// Without static credentials the client is refused unless ambient ones are
// allowed: the default chain never runs by accident.
func TestNewS3RefusesAmbientCredentialsUnlessAllowed(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "from-the-environment")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "from-the-environment")
	ctx := context.Background()
	if _, err := NewS3(ctx, S3Config{Bucket: "b"}); !errors.Is(err, backup.ErrCredentials) {
		t.Fatalf("no static credentials, ambient not allowed: err = %v, want ErrCredentials", err)
	}
	if _, err := NewS3(ctx, S3Config{Bucket: "b", AccessKeyID: "id", SecretAccessKey: "secret"}); err != nil {
		t.Fatalf("static credentials: %v", err)
	}
	st, err := NewS3(ctx, S3Config{Bucket: "b", AmbientCredentials: true})
	if err != nil {
		t.Fatalf("ambient allowed: %v", err)
	}
	creds, err := st.client.Options().Credentials.Retrieve(ctx)
	if err != nil || creds.AccessKeyID != "from-the-environment" {
		t.Fatalf("ambient allowed: the default chain gave %q, %v", creds.AccessKeyID, err)
	}
}
