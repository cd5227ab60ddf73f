# frozen_string_literal: true

require "base64"
require "openssl"
require "securerandom"
require "rack"
require_relative "client"

module Sluice
  # Rack middleware that asks the service about each request under its
  # limits, in order, and answers 429 (problem details, Retry-After and
  # the RateLimit fields) for the first that refuses it:
  #
  #   use Sluice::RackLimit, client: Sluice::Client.new("http://127.0.0.1:8080"), limits: [
  #     { rule: "form-ip", key: :ip, only_failures: true, reset_on_success: true },
  #     { rule: "form-user", key: "field:user", only_failures: true, paths: ["/login"] },
  #   ]
  #
  # A limit's options: +rule+ (the service's rule); +key+: :ip
  # (REMOTE_ADDR; default), "header:NAME", "field:NAME" (a form field,
  # down-cased, stripped and hashed: base64url of its SHA-256, or
  # HMAC-SHA-256 with +secret+, as httplimit.FormField does) or a
  # callable(env); +only_failures+ (count only failure responses, a 4xx
  # other than 429 or +is_failure+.call(status): a place is reserved before
  # the app and given back after a success); +reset_on_success+; +shadow+
  # (never refuse: env["sluice.limited"] is true when the limit would
  # have); +methods+ and +paths+ (which requests count: default all; path
  # prefixes).
  class RackLimit
    LIMITED = "sluice.limited"
    NO_KEY = "(none)"

    def initialize(app, client:, limits:)
      @app = app
      @client = client
      @limits = limits.map { |l| validate(l) }
    end

    def call(env)
      taken = []
      limited = false
      @limits.each do |l|
        next unless applies?(l, env)

        key = key_of(l, env)
        id = nil
        d = if l[:only_failures]
              id = SecureRandom.hex(16)
              @client.reserve(l[:rule], key, id)
            else
              @client.checked_insert(l[:rule], key)
            end
        limited = true if d.shadowed || (!d.allowed && l[:shadow])
        next if !d.allowed && l[:shadow]

        unless d.allowed
          settle(taken, nil)
          return denied(d)
        end
        taken << [l, key, id, d]
      end
      env[LIMITED] = limited
      begin
        status, headers, body = @app.call(env)
      rescue Exception # rubocop:disable Lint/RescueException
        settle(taken, nil)
        raise
      end
      settle(taken, status.to_i)
      best = taken.reject { |l, *| l[:shadow] }.map(&:last).select { |d| d.headers&.any? }.min_by(&:remaining)
      headers = headers.merge(best.headers.transform_keys(&:downcase)) if best
      [status, headers, body]
    end

    private

    def validate(l)
      l = l.transform_keys(&:to_sym)
      raise ArgumentError, "sluice: a limit needs the name of a rule of the service" unless l[:rule].is_a?(String) && !l[:rule].empty?

      k = l[:key] || :ip
      unless k == :ip || k == "ip" || k.respond_to?(:call) || (k.is_a?(String) && k.start_with?("header:", "field:"))
        raise ArgumentError, "sluice: rule '#{l[:rule]}': key #{k.inspect}: want :ip, 'header:NAME', 'field:NAME' or a callable"
      end

      l
    end

    def applies?(l, env)
      return false if l[:methods] && !l[:methods].map(&:upcase).include?(env["REQUEST_METHOD"])
      return false if l[:paths] && l[:paths].none? { |p| env["PATH_INFO"].to_s.start_with?(p) }

      true
    end

    def key_of(l, env)
      k = l[:key] || :ip
      v = if k.respond_to?(:call)
            k.call(env)
          elsif k.to_s == "ip"
            env["REMOTE_ADDR"]
          elsif k.start_with?("header:")
            h = env["HTTP_" + k.delete_prefix("header:").upcase.tr("-", "_")]
            h && h.bytesize > 256 ? "sha256:#{OpenSSL::Digest::SHA256.hexdigest(h)}" : h
          else
            f = ::Rack::Request.new(env).POST[k.delete_prefix("field:")] rescue nil
            f.is_a?(String) && !f.strip.empty? ? hash_field(f, l[:secret]) : nil
          end
      v.nil? || v.to_s.empty? ? NO_KEY : v.to_s
    end

    def hash_field(value, secret)
      v = value.strip.downcase.b
      digest = secret ? OpenSSL::HMAC.digest("SHA256", secret, v) : OpenSSL::Digest::SHA256.digest(v)
      Base64.urlsafe_encode64(digest, padding: false)
    end

    # Settles the taken limits after a response of status (nil: the
    # request never reached the app, or it raised).
    def settle(taken, status)
      taken.each do |l, key, id, d|
        next if d.error # the failure policy decided: nothing is held

        failed = status.nil? || (l[:is_failure] ? l[:is_failure].call(status) : (status >= 400 && status < 500 && status != 429))
        begin
          if id && d.allowed
            failed && status ? @client.commit(l[:rule], key, id) : @client.refund(l[:rule], key, id)
          end
          @client.reset(l[:rule], key) if l[:reset_on_success] && status && !failed
        rescue Unavailable => e
          warn "sluice: rule '#{l[:rule]}': settling a request: #{e.message}"
        end
      end
    end

    def denied(d)
      wait = [d.retry_after_seconds, 1].max
      body = JSON.generate(type: "about:blank", title: "Too Many Requests", status: 429,
                           detail: "rate limit of #{d.rule.empty? ? "the service" : d.rule} exceeded; retry in #{wait}s")
      headers = { "content-type" => "application/problem+json", "retry-after" => wait.to_s }
      d.headers&.each { |name, value| headers[name.downcase] = value }
      [429, headers, [body]]
    end
  end
end
