CREATE TABLE "token_usage_applied" (
	"turn_key" text PRIMARY KEY NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
