# frozen_string_literal: true

# The client's tests: minitest, with Rack::Test for the middleware. Exits
# 77 when a library the tests need is missing.
begin
  require "minitest"
  require "rack"
  require "rack/test"
rescue LoadError => e
  warn "missing: #{e.message} (Debian: ruby-minitest, ruby-rack, ruby-rack-test)"
  exit 77
end
require "sluice"
require "sluice/rack"
require_relative "support"
Dir[File.join(__dir__, "*_test.rb")].sort.each { |f| require f }
exit Minitest.run(ARGV) ? 0 : 1
