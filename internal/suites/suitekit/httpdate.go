package suitekit

import (
	"net/http"
	"time"

	"pgregory.net/rapid"
)

// An HTTPDateForm is one of the three forms of an HTTP date that RFC 9110
// (section 5.6.7) requires a recipient to accept: the preferred IMF-fixdate
// and the two obsolete ones, RFC 850's and C's asctime.
type HTTPDateForm int

const (
	// IMFFixdate is "Sun, 06 Nov 1994 08:49:37 GMT", what servers send.
	IMFFixdate HTTPDateForm = iota
	// RFC850Date is "Sunday, 06-Nov-94 08:49:37 GMT", with a two-digit year.
	RFC850Date
	// AsctimeDate is "Sun Nov  6 08:49:37 1994", with no zone (it is GMT).
	AsctimeDate
)

// httpDateLayouts are the layouts of the forms, in HTTPDateForm's order.
var httpDateLayouts = [...]string{http.TimeFormat, "Monday, 02-Jan-06 15:04:05 GMT", time.ANSIC}

// String names the form as RFC 9110 does.
func (f HTTPDateForm) String() string {
	return [...]string{"IMF-fixdate", "RFC 850", "asctime"}[f]
}

// HTTPDateForms draws one of the three forms, IMF-fixdate shrinking first.
func HTTPDateForms() *rapid.Generator[HTTPDateForm] {
	return rapid.SampledFrom([]HTTPDateForm{IMFFixdate, RFC850Date, AsctimeDate})
}

// FormatHTTPDate writes the whole second at (in UTC, whatever at's zone) as
// an HTTP date in form f, as seen by a recipient whose clock reads now.
// RFC 850's two-digit year is ambiguous: RFC 9110 reads a year more than 50
// years ahead of now as the past one, and Go's time package reads 69-99 as
// 19xx and 00-68 as 20xx. Where the two readings could differ, the date is
// written as IMF-fixdate instead, so every date this returns means at
// alone. The form used is returned with the text.
func FormatHTTPDate(at, now time.Time, f HTTPDateForm) (string, HTTPDateForm) {
	at = at.UTC()
	if f == RFC850Date {
		y, ny := at.Year(), now.UTC().Year()
		if y < 1970 || y > 2067 || y-ny >= 49 || ny-y >= 49 {
			f = IMFFixdate
		}
	}
	if at.Year() > 9999 || at.Year() < 1 {
		f = IMFFixdate // none of the forms has a fifth digit; the text is invalid either way
	}
	return at.Format(httpDateLayouts[f]), f
}
