package results

import (
	"bytes"
	"encoding/json"
)

// DecodeBrief reads one results document from b as Decode does, but leaves
// out the series that only the pages of one document draw: each flood's
// Samples, Timeline, Histograms and Workers, each storm's ServerSamples and
// SendsPerBin, and each scenario's Samples and DeadCallsAllowedS (and its
// flood's series). Everything else is decoded as Decode decodes it. A
// cohort of thousands of documents reads them this way: the series are
// most of a document's bytes, and nothing that compares documents reads
// them.
//
// The whole of b is still checked to be one well-formed JSON value, the
// series included; only the Go types of the series are not checked. Any
// error is Decode's own, word for word: on a document it cannot read,
// DecodeBrief asks Decode why.
//
// A document read this way must not be signed, verified or written back:
// it is not the document. Use Decode for those.
func DecodeBrief(b []byte) (*Document, error) {
	d, ok := decodeBrief(b)
	if ok {
		return d, nil
	}
	// Decode words every error as people read it, and knows every case
	// the fast path leaves to it.
	return Decode(bytes.NewReader(b))
}

// prune says which members of a JSON object DecodeBrief leaves out (drop),
// and how to read the objects some members hold (fields), alone or in an
// array.
type prune struct {
	drop   map[string]bool
	fields map[string]*prune
}

// runSeries are a flood's series.
var runSeries = &prune{drop: map[string]bool{"samples": true, "timeline": true, "histograms": true, "workers": true}}

// briefRules is what DecodeBrief leaves out of a Document.
var briefRules = &prune{fields: map[string]*prune{
	"runs":   runSeries,
	"storms": {drop: map[string]bool{"server_samples": true, "sends_per_bin": true}},
	"scenarios": {
		drop:   map[string]bool{"samples": true, "dead_calls_allowed_s": true},
		fields: map[string]*prune{"run": runSeries},
	},
}}

// decodeBrief is DecodeBrief's fast path: ok is false for anything it does
// not read, and Decode then says why.
func decodeBrief(b []byte) (*Document, bool) {
	if len(b) > MaxDocumentBytes {
		return nil, false
	}
	s := briefScanner{b: b, out: make([]byte, 0, len(b)/4)}
	s.ws()
	if s.i >= len(b) || b[s.i] != '{' || !s.object(briefRules) {
		return nil, false
	}
	s.ws()
	if s.i != len(b) {
		return nil, false
	}
	var head struct {
		Schema *string `json:"schema"`
	}
	if json.Unmarshal(s.out, &head) != nil || head.Schema == nil || *head.Schema != Schema {
		return nil, false
	}
	var d Document
	if json.Unmarshal(s.out, &d) != nil {
		return nil, false
	}
	return &d, true
}

// briefScanner checks JSON's grammar as encoding/json does and copies to
// out what a prune keeps.
type briefScanner struct {
	b   []byte
	i   int
	out []byte
}

func (s *briefScanner) ws() {
	// Indented documents are half whitespace: a local index, one test per
	// byte for the common case of a byte that is not.
	b, i := s.b, s.i
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	s.i = i
}

// object reads the object at s.i, whose first byte is '{', and writes it
// to out with p's members left out, or whole when p is nil.
func (s *briefScanner) object(p *prune) bool {
	if p == nil {
		start := s.i
		if !s.skip() {
			return false
		}
		s.out = append(s.out, s.b[start:s.i]...)
		return true
	}
	s.i++ // '{'
	s.out = append(s.out, '{')
	kept := 0
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		s.out = append(s.out, '}')
		return true
	}
	for {
		s.ws()
		keyStart := s.i
		if s.i >= len(s.b) || s.b[s.i] != '"' || !s.str() {
			return false
		}
		keyEnd := s.i
		key := s.b[keyStart+1 : keyEnd-1]
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch sub, nested := p.fields[string(key)]; {
		case p.drop[string(key)]:
			if !s.skip() {
				return false
			}
		default:
			if kept > 0 {
				s.out = append(s.out, ',')
			}
			kept++
			s.out = append(s.out, s.b[keyStart:keyEnd]...)
			s.out = append(s.out, ':')
			if !nested {
				start := s.i
				if !s.skip() {
					return false
				}
				s.out = append(s.out, s.b[start:s.i]...)
			} else if !s.nested(sub) {
				return false
			}
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			s.out = append(s.out, '}')
			return true
		default:
			return false
		}
	}
}

// nested reads a member's value that p applies to: an object, an array
// whose objects p applies to, or anything else, kept whole.
func (s *briefScanner) nested(p *prune) bool {
	switch s.b[s.i] {
	case '{':
		return s.object(p)
	case '[':
		s.i++
		s.out = append(s.out, '[')
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			s.out = append(s.out, ']')
			return true
		}
		for n := 0; ; n++ {
			s.ws()
			if s.i >= len(s.b) {
				return false
			}
			if n > 0 {
				s.out = append(s.out, ',')
			}
			if s.b[s.i] == '{' {
				if !s.object(p) {
					return false
				}
			} else {
				start := s.i
				if !s.skip() {
					return false
				}
				s.out = append(s.out, s.b[start:s.i]...)
			}
			s.ws()
			if s.i >= len(s.b) {
				return false
			}
			switch s.b[s.i] {
			case ',':
				s.i++
			case ']':
				s.i++
				s.out = append(s.out, ']')
				return true
			default:
				return false
			}
		}
	}
	start := s.i
	if !s.skip() {
		return false
	}
	s.out = append(s.out, s.b[start:s.i]...)
	return true
}

// skip reads one JSON value at s.i and checks its grammar, copying
// nothing.
func (s *briefScanner) skip() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		s.i++
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == '}' {
			s.i++
			return true
		}
		for {
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != '"' || !s.str() {
				return false
			}
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return false
			}
			s.i++
			s.ws()
			if !s.skip() {
				return false
			}
			s.ws()
			if s.i >= len(s.b) {
				return false
			}
			switch s.b[s.i] {
			case ',':
				s.i++
			case '}':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '[':
		s.i++
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			return true
		}
		for {
			s.ws()
			if !s.skip() {
				return false
			}
			s.ws()
			if s.i >= len(s.b) {
				return false
			}
			switch s.b[s.i] {
			case ',':
				s.i++
			case ']':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '"':
		return s.str()
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

// str reads a string at s.i, whose first byte is '"': no control
// character, only JSON's escapes.
func (s *briefScanner) str() bool {
	b := s.b
	i := s.i + 1
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			s.i = i + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return false
				}
				for _, h := range b[i+2 : i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return false
					}
				}
				i += 6
			default:
				return false
			}
		default:
			i++
		}
	}
	return false
}

// number reads a number in JSON's grammar: -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?
func (s *briefScanner) number() bool {
	b, i := s.b, s.i
	digits := func() bool {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	s.i = i
	return true
}

func (s *briefScanner) literal(word string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(word)) {
		return false
	}
	s.i += len(word)
	return true
}
