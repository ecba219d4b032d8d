CREATE TABLE `data_objects` (
	`key` text PRIMARY KEY NOT NULL,
	`kind` text NOT NULL,
	`bytes` integer NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`sent_at` text,
	`archive` text
);
--> statement-breakpoint
CREATE INDEX `data_objects_unsent_idx` ON `data_objects` (`sent_at`,`created_at`);--> statement-breakpoint
CREATE TABLE `leases` (
	`name` text PRIMARY KEY NOT NULL,
	`holder` text NOT NULL,
	`expires_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `mcp_servers` (
	`name` text PRIMARY KEY NOT NULL,
	`url` text NOT NULL,
	`provider_id` text NOT NULL,
	`authorization_headers` text NOT NULL,
	`headers` text NOT NULL,
	`timeout` integer,
	`created_by` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL
);
