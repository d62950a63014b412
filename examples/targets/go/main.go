// A minimal sentin8-cron target in Go (1.19 or later), with the standard library only.
//
// It serves POST /v1/internal/schedules/run and accepts a call only when its
// Sentin8-Signature verifies: the signature with the published key the token names (kid),
// the issuer, the audience (this target's own origin), the expiry, the SHA-256 of the exact
// body, and that the token was not seen before. Anything else is answered 401 with the reason.
//
// Settings, from the environment:
//
//	LISTEN    host:port to listen on (default 127.0.0.1:9000; port 0 picks a free one)
//	ORIGIN    scheme://host[:port] the scheduler calls this target at, as in the schedule's
//	          baseUrl (default http:// and the address listened on)
//	JWKS_URL  the scheduler's key set (default http://127.0.0.1:8080/.well-known/jwks.json)
//	ISSUER    the scheduler's signing issuer, its --signing-issuer (default sentin8-cron)
package main

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

const runPath = "/v1/internal/schedules/run"
const maxBody = 1 << 20

var (
	jwksURL = setting("JWKS_URL", "http://127.0.0.1:8080/.well-known/jwks.json")
	issuer  = setting("ISSUER", "sentin8-cron")
	origin  string // set once the address is bound
)

func setting(name, fallback string) string {
	if value, ok := os.LookupEnv(name); ok {
		return value
	}
	return fallback
}

// refused is a call answered 401; its text says why.
type refused string

func (r refused) Error() string { return string(r) }

var b64url = base64.RawURLEncoding

func b64urlSHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return b64url.EncodeToString(sum[:])
}

// jwk is one published key.
type jwk struct {
	Kid, Kty, Crv, Alg, X, Y string
}

// keySet holds the scheduler's public keys by kid. Fetched on first use and again when a
// token names a key not seen yet (after a key rotation), at most every 30 seconds.
type keySet struct {
	mu        sync.Mutex
	keys      map[string]jwk
	fetchedAt time.Time
}

var keys keySet

func (s *keySet) find(kid string) (jwk, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known := s.keys[kid]; !known && time.Since(s.fetchedAt) > 30*time.Second {
		s.fetchedAt = time.Now()
		client := http.Client{Timeout: 5 * time.Second}
		response, err := client.Get(jwksURL)
		if err != nil {
			return jwk{}, refused(fmt.Sprintf("cannot fetch the key set (%v)", err))
		}
		defer response.Body.Close()
		var published struct{ Keys []jwk }
		if response.StatusCode != http.StatusOK {
			return jwk{}, refused(fmt.Sprintf("cannot fetch the key set (status %d)", response.StatusCode))
		}
		if err := json.NewDecoder(response.Body).Decode(&published); err != nil {
			return jwk{}, refused(fmt.Sprintf("cannot read the key set (%v)", err))
		}
		s.keys = map[string]jwk{}
		for _, key := range published.Keys {
			s.keys[key.Kid] = key
		}
	}
	key, ok := s.keys[kid]
	if !ok || kid == "" {
		return jwk{}, refused("unknown key " + kid)
	}
	return key, nil
}

// checkSignature verifies with the algorithm the key is published for, never the one the
// token names.
func checkSignature(key jwk, signingInput, signature []byte) error {
	x, errX := b64url.DecodeString(key.X)
	switch {
	case key.Alg == "EdDSA" && key.Crv == "Ed25519" && errX == nil && len(x) == ed25519.PublicKeySize:
		if ed25519.Verify(ed25519.PublicKey(x), signingInput, signature) {
			return nil
		}
	case key.Alg == "ES256" && key.Crv == "P-256" && errX == nil && len(signature) == 64:
		y, errY := b64url.DecodeString(key.Y)
		public := ecdsa.PublicKey{Curve: elliptic.P256(), X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}
		if errY != nil || !public.Curve.IsOnCurve(public.X, public.Y) {
			break
		}
		// JWS carries r || s.
		r, s := new(big.Int).SetBytes(signature[:32]), new(big.Int).SetBytes(signature[32:])
		digest := sha256.Sum256(signingInput)
		if ecdsa.Verify(&public, digest[:], r, s) {
			return nil
		}
	}
	return refused("bad signature")
}

// seenTokens is the replay protection: each token is accepted once, remembered until it
// expires. A token is known by its jti together with its body hash. sentin8-cron gives every
// call a jti of its own, so the hash adds nothing there; with a version whose jti was the
// call's Idempotency-Key (the same for every retry of a job), a retry still differs by its
// body (its attempt number), while a replayed token repeats both.
type seenTokens struct {
	mu       sync.Mutex
	expiries map[[2]string]int64
}

var seen = seenTokens{expiries: map[[2]string]int64{}}

func (s *seenTokens) firstTime(jti, bodyHash string, exp int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().Unix()
	for token, expiry := range s.expiries {
		if expiry <= now {
			delete(s.expiries, token)
		}
	}
	id := [2]string{jti, bodyHash}
	if _, replayed := s.expiries[id]; replayed {
		return false
	}
	s.expiries[id] = exp
	return true
}

type claims struct {
	Iss        string `json:"iss"`
	Aud        string `json:"aud"`
	Exp        int64  `json:"exp"`
	Jti        string `json:"jti"`
	BodySHA256 string `json:"body_sha256"`
	EnvID      string `json:"env_id"`
	ScheduleID string `json:"schedule_id"`
	JobID      string `json:"job_id"`
}

// verifyCall returns the token's claims when the call may be accepted.
func verifyCall(token string, body []byte) (claims, error) {
	var header struct{ Alg, Kid string }
	var c claims
	if token == "" {
		return c, refused("no Sentin8-Signature header")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return c, refused("malformed token")
	}
	headerJSON, err1 := b64url.DecodeString(parts[0])
	claimsJSON, err2 := b64url.DecodeString(parts[1])
	signature, err3 := b64url.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil ||
		json.Unmarshal(headerJSON, &header) != nil || json.Unmarshal(claimsJSON, &c) != nil {
		return c, refused("malformed token")
	}
	key, err := keys.find(header.Kid)
	if err != nil {
		return c, err
	}
	if header.Alg != key.Alg {
		return c, refused(fmt.Sprintf("algorithm %s is not the key's", header.Alg))
	}
	if err := checkSignature(key, []byte(parts[0]+"."+parts[1]), signature); err != nil {
		return c, err
	}
	switch {
	case c.Iss != issuer:
		return c, refused("wrong issuer")
	case c.Aud != origin:
		return c, refused(fmt.Sprintf("wrong audience (not %s)", origin))
	case c.Exp <= time.Now().Unix():
		return c, refused("expired")
	case c.BodySHA256 != b64urlSHA256(body):
		return c, refused("body does not match body_sha256")
	case !seen.firstTime(c.Jti, c.BodySHA256, c.Exp):
		return c, refused("replayed token (jti seen before)")
	}
	return c, nil
}

func run(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != runPath {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	c, err := verifyCall(r.Header.Get("Sentin8-Signature"), body)
	if err != nil {
		fmt.Printf("401 %v\n", err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	// The work goes here. A retry of a job carries the same Idempotency-Key: do it once.
	// Continue the call's trace: an OpenTelemetry SDK reads `traceparent` with its W3C
	// propagator (propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header)));
	// its trace id is the job's.
	trace := r.Header.Get("Traceparent")
	if trace == "" {
		trace = "-"
	}
	fmt.Printf("200 job %s of schedule %s (env %s, trace %s): %s\n", c.JobID, c.ScheduleID, c.EnvID, trace, body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}`))
}

func main() {
	listener, err := net.Listen("tcp", setting("LISTEN", "127.0.0.1:9000"))
	if err != nil {
		log.Fatal(err)
	}
	address := listener.Addr().String()
	origin = setting("ORIGIN", "http://"+address)
	fmt.Printf("listening on http://%s\n", address)
	server := http.Server{Handler: http.HandlerFunc(run), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(server.Serve(listener))
}
