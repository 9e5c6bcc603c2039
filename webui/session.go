package webui

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// CookieName is the UI's session cookie. Browsers cannot put the
// operator token in an Authorization header of an EventSource, so the
// login form exchanges the token for this cookie: an expiry and an
// HMAC-SHA256 of it under a key derived from the token (never the token
// itself). Every controller of a cluster shares the token, so a session
// holds on any of them and across restarts; a new token ends every
// session.
const CookieName = "bulkhead_ui"

// CookiePath scopes the cookie to the UI's routes: the browser sends it
// nowhere else, and only the UI's routes accept it.
const CookiePath = "/ui/"

// SessionLifetime is how long a login lasts.
const SessionLifetime = 12 * time.Hour

const sessionPrefix = "v1."

// sessionKey derives the cookie's key from the operator token.
func sessionKey(token string) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("bulkhead web UI session v1"))
	return m.Sum(nil)
}

func sessionMAC(token string, exp int64) []byte {
	m := hmac.New(sha256.New, sessionKey(token))
	m.Write([]byte(strconv.FormatInt(exp, 10)))
	return m.Sum(nil)
}

// SessionValue is a session cookie's value for the token, valid until exp.
func SessionValue(token string, exp time.Time) string {
	e := exp.Unix()
	return sessionPrefix + strconv.FormatInt(e, 10) + "." + base64.RawURLEncoding.EncodeToString(sessionMAC(token, e))
}

// ValidSession says whether v is a session value for token that has not
// expired at now. An empty token has no sessions.
func ValidSession(token, v string, now time.Time) bool {
	if token == "" || len(v) > 128 {
		return false
	}
	rest, ok := strings.CutPrefix(v, sessionPrefix)
	if !ok {
		return false
	}
	es, mac, ok := strings.Cut(rest, ".")
	if !ok {
		return false
	}
	e, err := strconv.ParseInt(es, 10, 64)
	if err != nil || now.Unix() >= e || e > now.Add(SessionLifetime+time.Minute).Unix() {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil {
		return false
	}
	return hmac.Equal(got, sessionMAC(token, e))
}

// RequestSession says whether a request carries a valid session cookie
// for token.
func RequestSession(r *http.Request, token string, now time.Time) bool {
	c, err := r.Cookie(CookieName)
	return err == nil && ValidSession(token, c.Value, now)
}

// sessionCookie is the cookie set at login (value "" and MaxAge -1 clear
// it).
func sessionCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: value, Path: CookiePath, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
}
