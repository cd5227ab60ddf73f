# frozen_string_literal: true

require_relative "lib/sluice/client"

Gem::Specification.new do |s|
  s.name = "sluice-client"
  s.version = Sluice::VERSION
  s.summary = "Client of sluice serve's HTTP API: check, insert, checked insert, and a Rack middleware"
  s.description = "Asks a sluice serve rate limiter whether a key may act, over sockets of the standard library with kept-alive " \
                  "connections, timeouts and a failure policy; Sluice::RackLimit limits Rack applications."
  s.license = "Apache-2.0"
  s.authors = ["sluice"]
  s.required_ruby_version = ">= 3.1" # Process._fork, by which a forked child drops its parent's connections
  s.files = Dir["lib/**/*.rb"] + ["README.md"]
  s.require_paths = ["lib"]
  # The client needs the standard library only; the middleware, Rack.
  s.add_development_dependency "minitest", ">= 5"
  s.add_development_dependency "rack", ">= 2.2"
  s.add_development_dependency "rack-test", ">= 2.0"
end
