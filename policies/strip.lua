-- policies/strip.lua: what an account-bound blob becomes when a request goes
-- to an account that did not mint it. A blob is an opaque string only its
-- minting account can read: a reasoning item's encrypted_content, a
-- compaction item's, an encrypted content part inside a message or a tool
-- output. Called once per such blob with
-- {item_type, in_part, origin, origin_kind, target, target_kind, strip_retry}
-- (origin "" when the gateway does not know who minted it); returns
-- "keep" (send it as it is), "drop" (remove the item, or the part) or "text"
-- (replace it with a short text the model can read).
-- The gateway asks only for blobs the target did not mint: another account's,
-- and, on a strip-retry (the target refused a blob), those of unknown origin.
-- The built-in C default in src/policy/policy_defaults.c mirrors this rule.

local function strip(blob)
  if blob.origin ~= "" and blob.origin == blob.target then return "keep" end
  -- unknown origin: untouched, unless the target already refused a blob
  if blob.origin == "" and not blob.strip_retry then return "keep" end
  -- an encrypted part of a message or tool output, or a compaction (the
  -- conversation before it): the model still needs to know something was there
  if blob.in_part or blob.item_type == "compaction" or blob.item_type == "compaction_summary" then
    return "text"
  end
  -- a reasoning item goes whole: without its encrypted_content the API looks
  -- its id up as a stored item (404 under store=false), and a summary-only
  -- item is not reliably accepted (docs/policies.md)
  return "drop"
end

return { version = 1, strip = strip }
