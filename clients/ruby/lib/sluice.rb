# frozen_string_literal: true

# A client of sluice serve's HTTP JSON API (Sluice::Client: check, insert,
# checked insert, and the outcome calls), and a Rack middleware
# (Sluice::RackLimit, loaded by require "sluice/rack").
require_relative "sluice/client"
