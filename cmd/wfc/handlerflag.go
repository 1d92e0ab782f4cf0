package main

import (
	"fmt"
	"strings"

	"github.com/wfc-lang/wfc/runtime/handlers"
)

// serviceFlags is wfc worker's repeatable --handler NAME=URL: handlers
// that run as HTTP services (docs/handlers.md).
type serviceFlags struct{ vals [][2]string }

func (s *serviceFlags) String() string {
	var out []string
	for _, v := range s.vals {
		out = append(out, v[0]+"="+v[1])
	}
	return strings.Join(out, ",")
}

func (s *serviceFlags) Set(v string) error {
	name, url, ok := strings.Cut(v, "=")
	switch {
	case !ok || name == "" || url == "":
		return fmt.Errorf("want NAME=URL")
	case handlers.Core(name) || name == "exec":
		return fmt.Errorf("%s is a built-in handler", name)
	}
	for _, p := range s.vals {
		if p[0] == name {
			return fmt.Errorf("handler %s given twice", name)
		}
	}
	if _, err := handlers.NewService(name, url, handlers.ServiceOptions{}); err != nil {
		return err
	}
	s.vals = append(s.vals, [2]string{name, url})
	return nil
}

// register adds the service handlers to reg.
func (s *serviceFlags) register(reg *handlers.Registry) error {
	for _, v := range s.vals {
		h, err := handlers.NewService(v[0], v[1], handlers.ServiceOptions{})
		if err != nil {
			return err
		}
		reg.Register(v[0], h)
	}
	return nil
}
