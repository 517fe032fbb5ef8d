package intercept

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// TestOwnerKeyIsNotPublic: without TOLLGATE_OWNER_HASH_KEY the credential hash used to be keyed
// by the constant "tollgate owner v1", so an owner hash shown to approvers, webhooks or the
// audit log could be checked offline against guessed credentials. A Gateway without a key
// now uses a random one.
func TestOwnerKeyIsNotPublic(t *testing.T) {
	h := newHarness(t, unitConfig)
	h.gw.d.OwnerKey = ""
	x := modernExchange(t, "tools/list", "", noCaps, "Authorization", "Bearer guessable")
	var got string
	g := h.gw
	g.identified(func(_ context.Context, x *Exchange) Result { got = g.modernOwner(x); return Result{} })(context.Background(), x)
	mac := hmac.New(sha256.New, []byte("tollgate owner v1"))
	mac.Write([]byte("Bearer guessable"))
	if public := "auth:" + hex.EncodeToString(mac.Sum(nil)[:16]); got == public {
		t.Fatalf("owner %q is the HMAC under the published constant key", got)
	}
	if len(got) != len("auth:")+32 {
		t.Fatalf("owner %q: want auth:<32 hex digits>", got)
	}
}
