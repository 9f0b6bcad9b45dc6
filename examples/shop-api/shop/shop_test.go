package shop

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The demo answers the calls the examples' tools make, in the shapes their collect
// rules and accept rules read, and keeps each user to their own orders.
func TestShop(t *testing.T) {
	srv := httptest.NewServer(New())
	defer srv.Close()
	tests := []struct {
		name, method, path, user, body string
		code                           int
		want                           string // the response contains it
	}{
		{name: "u-42's orders", method: "GET", path: "/users/u-42/orders?status=any", code: 200,
			want: `{"orders":[{"number":"A1003","status":"unpaid","amount":268,`},
		{name: "filtered by status", method: "GET", path: "/users/u-42/orders?status=delivering", code: 200,
			want: `{"orders":[{"number":"A1002","status":"delivering"`},
		{name: "no orders is an empty list", method: "GET", path: "/users/nobody/orders", code: 200, want: `{"orders":[]}`},
		{name: "an order's details", method: "GET", path: "/users/u-42/orders/A1002", code: 200, want: `"courier":{"name":"王师傅"`},
		{name: "another user's order is not found", method: "GET", path: "/users/u-7/orders/A1002", code: 404, want: "no such order"},
		{name: "a delivering order cannot be cancelled", method: "POST", path: "/orders/A1002/cancel", user: "u-42", body: `{"reason":"x"}`, code: 409, want: "only unpaid orders"},
		{name: "another user cannot cancel", method: "POST", path: "/orders/A1003/cancel", user: "u-7", body: `{}`, code: 404},
		{name: "cancel an unpaid order", method: "POST", path: "/orders/A1003/cancel", user: "u-42", body: `{"reason":"x"}`, code: 200, want: `"status":"cancelled"`},
		{name: "cancelled now", method: "GET", path: "/users/u-42/orders?status=unpaid", code: 200, want: `{"orders":[]}`},
		{name: "refund a delivered order", method: "POST", path: "/orders/A1001/refunds", user: "u-42", body: `{"reason":"a drink was missing"}`, code: 200,
			want: `"refund":"R-77"`},
		{name: "no refund without a reason", method: "POST", path: "/orders/B2001/refunds", user: "u-7", body: `{"reason":""}`, code: 400},
		{name: "no refund before delivery", method: "POST", path: "/orders/B2002/refunds", user: "u-7", body: `{"reason":"late"}`, code: 409},
		{name: "a body that is not JSON", method: "POST", path: "/orders/B2002/cancel", user: "u-7", body: `reason`, code: 400},
		{name: "a body too large", method: "POST", path: "/orders/B2002/cancel", user: "u-7", body: `{"reason":"` + strings.Repeat("x", maxBody) + `"}`, code: 413},
		{name: "set the address", method: "PUT", path: "/users/u-7/address", body: `{"address":"北京市海淀区中关村大街1号"}`, code: 200, want: `"ok":true`},
		{name: "an unknown user has no address", method: "PUT", path: "/users/nobody/address", body: `{"address":"北京市海淀区中关村大街1号"}`, code: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.user != "" {
				req.Header.Set("X-User-Id", tt.user)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.code || !strings.Contains(string(b), tt.want) {
				t.Errorf("%s %s: %d %s, want %d containing %s", tt.method, tt.path, resp.StatusCode, b, tt.code, tt.want)
			}
			if !json.Valid(b) {
				t.Errorf("the response is not JSON: %s", b)
			}
		})
	}
}

// Requests beyond maxConcurrent are refused at once, not queued.
func TestShopBusy(t *testing.T) {
	s := New()
	for range maxConcurrent {
		s.slots <- struct{}{}
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/users/u-42/orders", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", rec.Code)
	}
	<-s.slots
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/users/u-42/orders", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("with a slot free: status %d, want 200", rec.Code)
	}
}
